"""The ``nvidia-tegra`` source: the integrated GPU of an NVIDIA SoC, found from the device tree.

The SoC is a Jetson, IGX or DRIVE. Its GPU is a platform device rather than a PCI function.

- The SoC: the ``nvidia,tegra<N>`` entry of ``proc/device-tree/compatible``, NUL-separated.
  Where procfs is not mounted: ``sys/firmware/devicetree/base/compatible``.
- A SoC in ``data/tegra.tsv`` has one GPU. Its CUDA name, compute capability and family
  come from there. The file is generated from NVIDIA's CUDA GPU pages:
  tests/data/ids/tegra-socs.tsv.
- The platform device: a device bound to a Tegra GPU driver, under
  ``sys/bus/platform/drivers/<driver>/<unit-address>.<name>``.
  The driver is ``nvgpu`` up to L4T 36, and ``nvidia`` from JetPack 7's unified driver.
  Its name is the GPU's address, else the SoC's.
- What CUDA answers is what GFD's ``tegra`` strategy labels.
  CUDA is :mod:`.cuda`: a ``cuda.json`` recording, or the host's libcuda.
  The device name, total memory, compute capability and CUDA driver version replace the table's.
- Memory: the GPU addresses the host's memory, unified memory.
  Without CUDA it is ``MemTotal`` of ``proc/meminfo``: what ``cuDeviceTotalMem`` answers there.
  That is the kernel's RAM, not the module's nominal size.
  It is in MiB, rounded down as GFD's ``gpu.memory``.
- The L4T release is the ``nvgpu`` driver's version: the module ships with L4T and has no
  version of its own. ``etc/nv_tegra_release``: ``# R36 (release), REVISION: 4.3`` -> ``36.4.3``.
"""

from __future__ import annotations

import re

from nfd_gpu.catalog import families, tables
from nfd_gpu.discovery.nvidia import cuda
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, NvidiaGpu, Snapshot
from nfd_gpu.record import replace

COMPATIBLE = ("proc/device-tree/compatible", "sys/firmware/devicetree/base/compatible")
GPU_DRIVERS = ("nvgpu", "nvidia")  # platform drivers of Tegra GPUs (L4T; JetPack 7)
L4T_RELEASE = "etc/nv_tegra_release"
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+(?:\.\d+)*)")
_PLATFORM_DEVICE = re.compile(r"^[0-9a-f]+\.[A-Za-z0-9_-]+$")  # <unit address>.<node name>
_MEMTOTAL = re.compile(r"^MemTotal:\s+(\d+)\s+kB$", re.MULTILINE)


def soc(host: HostRoot) -> str | None:
    """Return the SoC of an NVIDIA device tree, such as ``tegra234``; None elsewhere."""
    for path in COMPATIBLE:
        data = host.read_bytes(path)
        if data is not None:
            for entry in data.decode("ascii", "replace").split("\0"):
                if entry.startswith("nvidia,tegra"):
                    return entry.removeprefix("nvidia,")
            return None
    return None


def l4t_release(host: HostRoot) -> str | None:
    """Return the L4T release of ``etc/nv_tegra_release``, such as ``36.4.3``; None without one."""
    text = host.read_text(L4T_RELEASE)
    m = _RELEASE.match(text or "")
    if text and not m:
        host.warn(f"/{L4T_RELEASE}: unexpected content {text[:40]!r}")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def platform_device(host: HostRoot) -> tuple[str, str] | None:
    """Return device name and driver of the GPU's platform device bound to a Tegra GPU driver."""
    for driver in GPU_DRIVERS:
        for name in host.listdir(f"sys/bus/platform/drivers/{driver}"):
            if _PLATFORM_DEVICE.match(name):
                return name, driver
    return None


def mem_total_mib(host: HostRoot) -> int | None:
    """Return ``MemTotal`` of ``proc/meminfo`` in MiB, rounded down."""
    m = _MEMTOTAL.search(host.read_text("proc/meminfo") or "")
    return int(m.group(1)) // 1024 if m else None


def integrated_gpu(host: HostRoot, chip: str, facts: cuda.CudaFacts | None) -> Gpu | None:
    """Return the SoC's GPU record: the table's facts, CUDA's answers over them."""
    known = tables.tegra(chip)
    if known is None:
        host.warn(f"NVIDIA SoC {chip}: not in the Tegra table, its GPU is not labelled")
        return None
    name, major, minor, family = known
    prov = {"product": "table", "compute_capability": "table", "family": "table"}
    memory, prov["memory_mib"] = mem_total_mib(host), "meminfo"
    dev = facts.devices[0] if facts and facts.devices else None
    if dev is not None:
        if dev.name:
            name, prov["product"] = dev.name, "cuda"
        if dev.total_mem is not None:
            memory, prov["memory_mib"] = dev.total_mem >> 20, "cuda"
        if dev.compute_major is not None and dev.compute_minor is not None:
            major, minor, prov["compute_capability"] = dev.compute_major, dev.compute_minor, "cuda"
            family = families.nvidia_family(major, minor) or family
    if memory is None:
        del prov["memory_mib"]
    found = platform_device(host)
    address, driver = found or (chip, None)
    return Gpu(
        address=address,
        vendor="nvidia",
        vendor_id="",
        device_id="",
        class_id="",
        product=name or f"NVIDIA {chip}",
        family=family,
        memory_mib=memory,
        driver=driver,
        mode="container" if driver else None,
        integrated=True,
        nvidia=NvidiaGpu(
            compute_major=major,
            compute_minor=minor,
            mig_capable=False,
            cuda_answered=prov["product"] == "cuda",
        ),
        provenance=prov,
    )


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    host = ctx.host
    chip = soc(host)
    if chip is None:
        return snap
    facts = cuda.query(host)
    gpu = integrated_gpu(host, chip, facts)
    if gpu is None:
        return snap
    versions = dict(snap.driver_versions)
    release = l4t_release(host)
    if release:
        versions["l4t"] = release
        if gpu.driver == "nvgpu":
            versions["nvgpu"] = release
    if facts is not None and facts.version:
        versions["cuda"] = facts.version
    return replace(snap, gpus=(*snap.gpus, gpu), driver_versions=versions)


SOURCE = Source("nvidia-tegra", _discover)
