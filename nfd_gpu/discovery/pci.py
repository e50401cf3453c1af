"""PCI discovery: every function under ``sys/bus/pci/devices``, read once.

Formats, from ``drivers/pci/pci-sysfs.c`` and ``Documentation/ABI/testing/sysfs-bus-pci``:

- ``vendor``, ``device`` and ``subsystem_*`` are ``0x%04x``;
- ``class`` is ``0x%06x``, ``revision`` ``0x%02x``;
- ``numa_node`` is ``%d``, ``-1`` when unknown;
- link speeds are ``8 GT/s`` on older kernels and ``8.0 GT/s PCIe`` on newer ones.

``uevent`` carries class, ids, subsystem ids and the bound driver in one read.
So it is read first; the individual attribute files are the fallback.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

from nfd_gpu.discovery.passthrough import is_vfio_driver
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import PciDevice, PcieLink, Snapshot
from nfd_gpu.record import replace

PCI_DEVICES = "sys/bus/pci/devices"

# SR-IOV TotalVFs is a 16-bit field of the capability (PCIe base spec 9.3.3.6): no
# function can have more VFs, so no loop over a count read from sysfs goes further.
MAX_VFS = 0xFFFF

_ADDR_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_SPEED_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GT/s")

# Transfer rate (GT/s) -> PCIe generation.
_GT_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def parse_link_speed(text: str | None) -> int | None:
    """Parse a link speed: ``8 GT/s`` or ``8.0 GT/s PCIe`` -> 3; ``Unknown`` and garbage -> None."""
    if not text:
        return None
    m = _SPEED_RE.match(text.strip())
    if not m:
        return None
    return _GT_TO_GEN.get(float(m.group(1)))


def parse_link_width(text: str | None) -> int | None:
    """Parse a lane count of ASCII digits.

    0 and values above x32 are unknown, such as 255 on non-PCIe functions.
    """
    word = (text or "").split()[:1]
    if not word or len(word[0]) > 3 or not (word[0].isascii() and word[0].isdigit()):
        return None
    w = int(word[0])
    return w if 1 <= w <= 32 else None


def upstream_port(host: HostRoot, base: str) -> str | None:
    """Return ``sys/bus/pci/devices/<port>`` of the bridge above the function at ``base``.

    - The bridge is the parent directory of the function's ``sys/devices/...`` path.
    - None when the parent is no PCI function: a root bus.
      That is a root complex integrated endpoint, or a VM's flat bus.
    """
    target = host.readlink(base)
    if target is None:
        return None
    parent = target.rstrip("/").rsplit("/", 2)
    name = parent[-2] if len(parent) >= 2 else ""
    return f"{PCI_DEVICES}/{name}" if _ADDR_RE.match(name) else None


_HEX_DIGITS = "0123456789abcdefABCDEF"


@functools.lru_cache(maxsize=4096)
def parse_hex_id(text: str | None, digits: int) -> str | None:
    """Parse an id: ``0x10de`` -> ``10de``, lower case, zero padded; None for garbage.

    Cached: the same few ids repeat across thousands of functions.
    """
    if text is None:
        return None
    t = text.strip()
    if t[:2] in ("0x", "0X"):
        t = t[2:]
    # lstrip(hex digits) leaves "" only when every character is a hex digit.
    if not t or len(t) > digits or t.lstrip(_HEX_DIGITS):
        return None
    return t.lower().rjust(digits, "0")


def _parse_uevent(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\n"):
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v.strip()
    return out


@functools.lru_cache(maxsize=4096)
def _pair(text: str | None) -> tuple[str | None, str | None]:
    """Split ``10DE:2330`` -> ``10de``, ``2330``."""
    if not text:
        return None, None
    a, sep, b = text.partition(":")
    if not sep:
        return None, None
    return parse_hex_id(a, 4), parse_hex_id(b, 4)


def _is_gpu_related(vendor: str, class_id: str, gpu_vendor_ids: Collection[str]) -> bool:
    """Tell whether a function gets the full attribute read.

    Those are GPU-vendor display or accelerator functions, and NVIDIA bridges: NVSwitch.
    """
    if vendor not in gpu_vendor_ids:
        return False
    return class_id[:2] in ("03", "12") or (vendor == "10de" and class_id[:4] == "0680")


def read_identity(
    host: HostRoot, address: str
) -> tuple[str, str, str, str, str, str | None] | None:
    """Return class, vendor, device, subsystem vendor, subsystem device and driver of a function.

    ``uevent`` carries all of them in one read; the attribute files are the fallback.
    """
    base = f"{PCI_DEVICES}/{address}"
    ue_text = host.read_text(f"{base}/uevent")
    ue = _parse_uevent(ue_text) if ue_text else {}

    class_id = parse_hex_id(ue["PCI_CLASS"], 6) if "PCI_CLASS" in ue else None
    vendor, device = _pair(ue.get("PCI_ID"))
    sub_vendor, sub_device = _pair(ue.get("PCI_SUBSYS_ID"))
    driver: str | None = ue.get("DRIVER") or None

    if class_id is None:
        class_id = _hex_attr(host, f"{base}/class", 6)
    if vendor is None:
        vendor = _hex_attr(host, f"{base}/vendor", 4)
    if device is None:
        device = _hex_attr(host, f"{base}/device", 4)
    if sub_vendor is None:
        sub_vendor = _hex_attr(host, f"{base}/subsystem_vendor", 4)
    if sub_device is None:
        sub_device = _hex_attr(host, f"{base}/subsystem_device", 4)
    if driver is None and not ue_text:
        driver = host.readlink_name(f"{base}/driver")

    if class_id is None or vendor is None or device is None:
        host.warn(f"/{base}: skipped, class/vendor/device unreadable")
        return None
    return class_id, vendor, device, sub_vendor or "", sub_device or "", driver


def read_device(
    host: HostRoot,
    address: str,
    gpu_vendor_ids: Collection[str],
    *,
    full: bool | None = None,
    physfn: str | None = None,
    nfd_attributes: bool = True,
) -> PciDevice | None:
    """Read one PCI function; None, with a warning, when its identity is unreadable.

    - Every function gets identity, driver and SR-IOV attributes: what NFD's ``pci.device``
      needs. A VF given with ``physfn`` has no SR-IOV files to read.
    - GPU-related functions also get revision, NUMA node, IOMMU group, ``physfn``,
      PCIe link and DRM nodes.
    - GPU-related is ``full``. By default vendor and class decide it:
      a function of one of ``gpu_vendor_ids``, the registered vendors' PCI ids.
    - The other thousands of functions, NIC VFs and bridges, cost two reads each.
      That keeps a scan cheaper than ``lspci``.
    - ``nfd_attributes=False`` leaves out the IOMMU attributes only NFD's ``pci.device``
      feature carries.
    """
    base = f"{PCI_DEVICES}/{address}"
    raw: dict[str, str] = {}  # NFD attributes the typed fields cannot hold
    ident = read_identity(host, address)
    if ident is None:
        # NFD's pci source skips a function only when an attribute file is unreadable; a
        # malformed value is kept as read. Such a function is no GPU: only NFD's view keeps it.
        nfd = _nfd_identity(host, base)
        if not nfd:
            return None
        ident = _typed_identity(host, base, nfd, raw)
    class_id, vendor, device, sub_vendor, sub_device, driver = ident
    if full is None:
        full = _is_gpu_related(vendor, class_id, gpu_vendor_ids)
    totalvfs, numvfs, virtfns = _sriov(host, base, physfn, raw)
    basic = PciDevice(
        address=address,
        class_id=class_id,
        vendor=vendor,
        device=device,
        subsystem_vendor=sub_vendor,
        subsystem_device=sub_device,
        driver=driver,
        sriov_totalvfs=totalvfs,
        sriov_numvfs=numvfs,
        physfn=physfn,
        virtfns=virtfns,
        iommu_type=_nfd_value(host, f"{base}/iommu_group/type") if nfd_attributes else None,
        intel_iommu_version=(
            _nfd_value(host, f"{base}/iommu/intel-iommu/version") if nfd_attributes else None
        ),
        nfd_raw=tuple(sorted(raw.items())),
    )
    return _with_gpu_attributes(host, base, basic) if full else basic


def _typed_identity(
    host: HostRoot, base: str, nfd: dict[str, str], raw: dict[str, str]
) -> tuple[str, str, str, str, str, None]:
    """Return the identity of a function with malformed ids.

    A value that is not hex is "". The value as NFD read it goes into ``raw``.
    """
    typed = {a: parse_hex_id(host.read_text(f"{base}/{a}"), 4) for a in NFD_MANDATORY[1:]}
    typed["class"] = parse_hex_id(host.read_text(f"{base}/class"), 6)
    raw.update({a: v for a, v in nfd.items() if typed[a] is None})
    return (
        typed["class"] or "",
        typed["vendor"] or "",
        typed["device"] or "",
        typed["subsystem_vendor"] or "",
        typed["subsystem_device"] or "",
        None,
    )


def _sriov(
    host: HostRoot, base: str, physfn: str | None, raw: dict[str, str]
) -> tuple[int | None, int | None, tuple[str, ...]]:
    """Return total VFs, enabled VFs and VF addresses, bounded whatever the files say.

    A negative total is kept as read in ``raw``, as NFD does.
    """
    # A VF (``physfn`` known from its PF's virtfnN link) has no SR-IOV capability, so
    # no sriov_* files: not reading them saves a failed open per host-side VF.
    totalvfs = None if physfn else host.read_int(f"{base}/sriov_totalvfs")
    numvfs = host.read_int(f"{base}/sriov_numvfs") if totalvfs is not None else None
    if totalvfs is not None and totalvfs < 0:
        host.warn(f"/{base}/sriov_totalvfs: negative value {totalvfs}")
        raw["sriov_totalvfs"] = str(totalvfs)  # NFD keeps the value as read
        totalvfs = None
    if numvfs is not None and numvfs < 0:
        host.warn(f"/{base}/sriov_numvfs: negative value {numvfs}")
        numvfs = None
    if totalvfs is not None and totalvfs > MAX_VFS:
        host.warn(f"/{base}/sriov_totalvfs: {totalvfs} exceeds the PCIe limit {MAX_VFS}")
        totalvfs = MAX_VFS
    if numvfs is not None and totalvfs is not None and numvfs > totalvfs:
        host.warn(f"/{base}/sriov_numvfs: {numvfs} exceeds sriov_totalvfs {totalvfs}")
        numvfs = totalvfs
    virtfns: tuple[str, ...] = ()
    if totalvfs and numvfs:
        # bounded: numvfs <= totalvfs <= MAX_VFS, whatever the files say
        names = (host.readlink_name(f"{base}/virtfn{i}") for i in range(numvfs))
        virtfns = tuple(n for n in names if n)
    return totalvfs, numvfs, virtfns


def _with_gpu_attributes(host: HostRoot, base: str, basic: PciDevice) -> PciDevice:
    """Return ``basic`` with what only GPU-related functions get.

    That is revision, NUMA node, IOMMU group, ``physfn``, PCIe link and DRM nodes.
    """
    numa = host.read_int(f"{base}/numa_node")
    link = None
    cur_speed = host.read_text(f"{base}/current_link_speed")
    if cur_speed is not None:
        port = upstream_port(host, base)
        link = PcieLink(
            current_gen=parse_link_speed(cur_speed),
            current_width=parse_link_width(host.read_text(f"{base}/current_link_width")),
            max_gen=parse_link_speed(host.read_text(f"{base}/max_link_speed")),
            max_width=parse_link_width(host.read_text(f"{base}/max_link_width")),
            port_max_gen=parse_link_speed(host.read_text(f"{port}/max_link_speed"))
            if port
            else None,
            port_max_width=parse_link_width(host.read_text(f"{port}/max_link_width"))
            if port
            else None,
        )
    drm: tuple[str, ...] = ()
    if basic.class_id[:2] in ("03", "12"):
        drm = tuple(n for n in host.listdir(f"{base}/drm") if n.startswith(("card", "render")))
    return replace(
        basic,
        revision=_hex_attr(host, f"{base}/revision", 2) or "",
        numa_node=numa if numa is not None and numa >= 0 else None,
        iommu_group=host.readlink_name(f"{base}/iommu_group"),
        physfn=basic.physfn or host.readlink_name(f"{base}/physfn"),
        link=link,
        drm=drm,
        bars=_bars(host, base) if is_vfio_driver(basic.driver) else (),
    )


def _bars(host: HostRoot, base: str) -> tuple[tuple[int, int, int], ...]:
    """Return index, size in bytes and flags of the memory windows: the BARs.

    - They are the first six lines of ``resource``. See Documentation/PCI/sysfs-pci.rst.
    - Read for functions bound to a VFIO driver only.
      GFD's vfio strategy reports those of vfio-pci's as memory.
    - A missing file is a warning.
    - So is a line that is not three hex values: a window lost.
    """
    out: list[tuple[int, int, int]] = []
    rel = f"{base}/resource"
    for i, line in enumerate((host.read_text(rel, optional=False) or "").splitlines()[:6]):
        try:
            start, end, flags = (int(v, 16) for v in line.split())
        except ValueError:
            host.warn(f"/{rel}: line {i + 1} is not three hex values: {line[:60]!r}")
            continue
        if end > start:
            out.append((i, end - start + 1, flags))
    return tuple(out)


NFD_MANDATORY = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device")


def _nfd_value(host: HostRoot, rel: str) -> str | None:
    """Return an attribute as NFD's pci source reads it: trimmed, a leading ``0x`` dropped.

    - None when unreadable or not printable: a feature value must stay one line.
    - NUL bytes are kept, as NFD keeps them. read_text drops them.
    """
    data = host.read_bytes(rel)
    if data is None:
        return None
    value = data.decode("utf-8", "replace").strip().removeprefix("0x").strip()
    return value if value.replace("\x00", "").isprintable() else None


def _nfd_identity(host: HostRoot, base: str) -> dict[str, str]:
    """Return NFD's five mandatory attributes, or {} when one is unreadable.

    The class is cut to 4 characters.
    """
    out = {}
    for attr in NFD_MANDATORY:
        value = _nfd_value(host, f"{base}/{attr}")
        if value is None:
            return {}
        out[attr] = value[:4] if attr == "class" else value
    return out


def _hex_attr(host: HostRoot, rel: str, digits: int) -> str | None:
    text = host.read_text(rel)
    if text is None:
        return None
    v = parse_hex_id(text, digits)
    if v is None:
        host.warn(f"/{rel}: not a hex id: {text[:40]!r}")
    return v


def list_addresses(host: HostRoot) -> list[str]:
    """PCI addresses under ``sys/bus/pci/devices``, sorted; odd names are warned about."""
    out = []
    for name in host.listdir(PCI_DEVICES):
        if _ADDR_RE.match(name):
            out.append(name)
        else:
            host.warn(f"/{PCI_DEVICES}/{name}: not a PCI address, ignored")
    return out


def discover(
    host: HostRoot, gpu_vendor_ids: Collection[str], nfd_attributes: bool = True
) -> tuple[PciDevice, ...]:
    """Return every readable PCI function on the host, in address order.

    - The functions of ``gpu_vendor_ids`` that can be GPUs get the full read.
      Those are PCI vendor ids.
    - The IOMMU attributes of NFD's ``pci.device`` are read only with ``nfd_attributes``.
    - A VF named by its PF's ``virtfnN`` link is recorded with ``physfn`` from that link.
      PFs sort before their VFs. So host-side VFs cost two reads each.
    """
    devices = []
    nfd = nfd_attributes
    vf_parent: dict[str, str] = {}
    for address in list_addresses(host):
        parent = vf_parent.get(address)
        if parent is not None:
            dev = read_device(
                host, address, gpu_vendor_ids, full=False, physfn=parent, nfd_attributes=nfd
            )
        else:
            dev = read_device(host, address, gpu_vendor_ids, nfd_attributes=nfd)
        if dev is None:
            continue
        for vf in dev.virtfns:
            vf_parent[vf] = address
        devices.append(dev)
    return tuple(devices)


def source(gpu_vendor_ids: Collection[str]) -> Source:
    """Return the ``pci`` source, reading the functions of ``gpu_vendor_ids`` in full."""

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        pci = discover(ctx.host, gpu_vendor_ids, ctx.nfd_attributes)
        return replace(snap, pci=pci)

    return Source("pci", run)
