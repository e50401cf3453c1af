"""NVIDIA vGPU guests: the PCI vendor-specific capability a vGPU device carries.

Layout, as GFD v0.19.0 reads it in ``internal/vgpu/pciutil.go`` and ``vgpu.go``; facts only:

* The config space must be whole: 256 bytes or more. An unprivileged reader gets 64.
* Bit 0x10 of the status register at offset 0x06 says there is a capability list.
* Its first offset is the byte at 0x34.
* Each capability is ``id`` at +0, ``next`` at +1, ``length`` at +2.
* The walk stops at offset 0, at id 0xff, or on a loop.
* The first vendor-specific capability has id 0x09. It is ``length`` bytes from its id byte.
  It is a vGPU when bytes 3 and 4 are ``'V'`` and ``'F'``.
* Records start at byte 5: ``record id`` at +0, ``record length`` at +1.
* Records are skipped by their length until one has id 0: the host driver version record.
* Its data at +2 is 10 bytes of host driver version, then 10 bytes of branch, NULs trimmed.

A vGPU device becomes mode ``vgpu-guest``, as NVML's virtualization mode VGPU does.
Reads are bounded by ``HostRoot.read_bytes``. Nothing here raises on any input.
"""

from __future__ import annotations

from collections.abc import Callable

from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, PciDevice, Snapshot
from nfd_gpu.record import replace

CONFIG_MIN = 256
_STATUS = 0x06
_STATUS_CAP_LIST = 0x10
_CAP_PTR = 0x34
_CAP_VENDOR = 0x09
_RECORDS = 5
_FIELD = 10


def walk(read: Callable[[int, int], bytes | None]) -> tuple[bool, bytes | None]:
    """Return whether the config space is whole, and the first vendor-specific capability or None.

    ``read(offset, size)`` is called only where the walk needs:

    - byte 255, to tell whether the space is whole;
    - the status register and the capability pointer;
    - 3 bytes per capability;
    - the vendor capability itself.
    """
    if len(read(CONFIG_MIN - 1, 1) or b"") != 1:
        return False, None  # unprivileged reads stop at 64 bytes: nothing is known
    status = read(_STATUS, 1) or b""
    ptr = read(_CAP_PTR, 1) or b""
    if len(status) != 1 or len(ptr) != 1:
        return False, None
    if not status[0] & _STATUS_CAP_LIST:
        return True, None
    seen: set[int] = set()
    pos = ptr[0]
    while pos != 0 and pos not in seen and pos + 2 < CONFIG_MIN:
        seen.add(pos)
        head = read(pos, 3) or b""
        if len(head) != 3:
            return False, None
        cap_id, nxt, length = head
        if cap_id == 0xFF:
            return True, None
        if cap_id == _CAP_VENDOR:
            return True, read(pos, length) or b""
        pos = nxt
    return True, None


def is_vgpu(cap: bytes | None) -> bool:
    return cap is not None and len(cap) >= 5 and cap[3:5] == b"VF"


def host_driver(cap: bytes) -> tuple[str, str] | None:
    """Return host driver version and branch from the host driver version record, id 0, or None."""
    if not is_vgpu(cap):
        return None
    pos = _RECORDS
    while pos + 1 < len(cap) and cap[pos] != 0:
        step = cap[pos + 1]
        if step == 0:
            return None  # a zero-length record would never end
        pos += step
    if pos >= len(cap) or cap[pos] != 0 or pos + 2 + 2 * _FIELD > len(cap):
        return None
    data = cap[pos + 2 : pos + 2 + 2 * _FIELD]
    version = data[:_FIELD].strip(b"\x00").decode("latin-1")
    branch = data[_FIELD:].strip(b"\x00").decode("latin-1")
    return _printable(version), _printable(branch)


def _printable(s: str) -> str:
    return "".join(c for c in s if c.isascii() and c.isprintable())


def read_capability(host: HostRoot, rel: str) -> tuple[bool, bytes | None]:
    """Run :func:`walk` over the config file ``rel`` with ``pread``.

    It reads a few bytes, not the 4 KiB file: in a VM every config access traps to the hypervisor.
    """
    return walk(lambda off, n: host.read_at(rel, off, n))


# Per device identity (path, inode, mtime, size, ids): the capability of a present device
# does not change, so the agent reads it once, not every pass. Bounded.
_CAP_CACHE: dict[tuple[object, ...], tuple[bool, bytes | None]] = {}
_CAP_CACHE_MAX = 4096


def cached_capability(host: HostRoot, g: Gpu) -> tuple[bool, bytes | None]:
    rel = f"sys/bus/pci/devices/{g.address}/config"
    st = host.stat(rel)
    if st is None:
        return False, None
    key = (
        host.path(rel), st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size,
        g.vendor_id, g.device_id, g.subsystem_vendor_id, g.subsystem_device_id, g.revision,
    )  # fmt: skip
    hit = _CAP_CACHE.get(key)
    if hit is None:
        hit = read_capability(host, rel)
        if len(_CAP_CACHE) >= _CAP_CACHE_MAX:
            _CAP_CACHE.clear()
        _CAP_CACHE[key] = hit
    return hit


def whole(host: HostRoot, address: str) -> bool:
    """Tell whether the config space of one PCI function is readable in full: 256 bytes or more."""
    rel = f"sys/bus/pci/devices/{address}/config"
    return len(host.read_at(rel, CONFIG_MIN - 1, 1) or b"") == 1


def apply(
    host: HostRoot, gpus: tuple[Gpu, ...], functions: tuple[PciDevice, ...] = ()
) -> tuple[Gpu, ...]:
    """Read each NVIDIA GPU's vendor capability; mark vGPU guests and their host driver.

    - ``nvidia.vgpu_capability`` is known, true or false, only where the capability list of
      every NVIDIA PCI function was readable.
    - ``functions`` are the node's other PCI functions: audio, NVSwitch, ...
    - Why: GFD lists them all and writes no ``vgpu.*`` label when one config space is short.
      So the absence of the capability is a fact only then.
    - A short or unreadable file only means unknown. An unprivileged reader gets 64 bytes.
    """
    gpu_addrs = {g.address for g in gpus}
    others_whole = all(
        whole(host, f.address)
        for f in functions
        if f.vendor == "10de" and f.address not in gpu_addrs
    )
    out = []
    for g in gpus:
        if g.vendor != "nvidia":
            out.append(g)
            continue
        readable, cap = cached_capability(host, g)
        if not readable:
            out.append(g)
            continue
        out.append(_with_capability(g, cap, others_whole))
    return tuple(out)


def _with_capability(g: Gpu, cap: bytes | None, others_whole: bool) -> Gpu:
    """Return ``g`` marked with what its capability says, when readable."""
    provenance = dict(g.provenance)
    vgpu = cap is not None and is_vgpu(cap)
    nvidia = replace(g.nvidia, vgpu_capability=vgpu if others_whole else None)
    if others_whole:
        provenance["vgpu_capability"] = "pci-config"
    if cap is None or not vgpu:
        return replace(g, nvidia=nvidia, provenance=provenance)
    provenance["mode"] = provenance["virtualization"] = "pci-config"
    nvidia = replace(nvidia, virtualization="vgpu-guest")
    info = host_driver(cap)
    if info is not None:
        nvidia = replace(nvidia, vgpu_host_driver_version=info[0], vgpu_host_driver_branch=info[1])
    return replace(g, mode="vgpu-guest", nvidia=nvidia, provenance=provenance)


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    return replace(snap, gpus=apply(ctx.host, snap.gpus, snap.pci))


SOURCE = Source("nvidia-vgpu", _discover, needs=("nvidia",))
