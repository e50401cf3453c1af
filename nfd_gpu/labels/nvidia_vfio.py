"""GFD's opt-in ``vfio`` device discovery strategy (``flags.deviceDiscoveryStrategy: vfio``):
the GPUs of a virtualisation host, bound to ``vfio-pci`` for passthrough, labelled from PCI
alone, as NVIDIA/k8s-device-plugin v0.19.0's vfio resource manager does
(``internal/resource/sysfs-lib.go``, ``sysfs-device.go``; its device list is go-nvlib's
``nvpci.GetGPUs``).

- The GPUs: NVIDIA functions of PCI class ``0x030000`` or ``0x030200`` that are not SR-IOV
  VFs and are bound to ``vfio-pci``, in PCI address order (``sysfs-lib.go:48-64``): the
  address read as one hex number, as go-nvlib sorts (``nvpci.go:223-232``), so a 5- to
  8-digit domain (``10000:01:00.0``, VMD) sorts after ``2000:01:00.0``.
- Product: the pci.ids device name (``sysfs-device.go:50-52``, go-nvlib ``nvpci.go:342-348``),
  ``UNKNOWN_DEVICE`` for an id the list lacks. nfd-gpu's copy is ``data/nvidia-pci-names.tsv``
  (Debian's pci.ids 2026.10.24, tests/data/ids/README.md); GFD's image has no pci.ids, so
  GFD names from the copy built into go-nvlib (pci.ids 2025.07.11).
- Memory: the 64-bit memory BARs summed and rounded up to a power of two, in bytes (GFD
  writes go-nvlib's ``GetTotalAddressableMemory`` value as ``gpu.memory``,
  ``sysfs-device.go:55-58``; ``nvpci/resources.go:89-139``); none when no BAR is known.
- Compute capability ``-1.-1`` (``sysfs-device.go:35-37``: family ``undefined``), no MIG,
  no fabric; driver version ``unknown.unknown.unknown`` and CUDA ``0.0``
  (``sysfs-lib.go:67-74``).
"""

from __future__ import annotations

import dataclasses

from nfd_gpu.catalog import tables
from nfd_gpu.model import Gpu, NvidiaGpu, PciDevice, Snapshot

VFIO_DRIVER = "vfio-pci"
GPU_CLASSES = ("030000", "030200")  # go-nvlib nvpci IsGPU: VGA or 3D controller, prog-if 0
UNKNOWN_DEVICE = "UNKNOWN_DEVICE"  # go-nvlib nvpci.UnknownDeviceString
DRIVER_VERSION = "unknown.unknown.unknown"
CUDA_VERSION = (0, 0)
# what the vfio manager answers for every device: no compute capability, no MIG, no fabric
_NO_NVML = NvidiaGpu(compute_major=-1, compute_minor=-1, mig_capable=False, mig_enabled=False)
_BAR_MEMORY_TYPE = 0x06  # PCI_BASE_ADDRESS_MEM_TYPE_MASK
_BAR_64BIT = 0x04
_LISTED_VENDORS = ("10de", "15b3")  # go-nvlib lists NVIDIA and Mellanox functions


def pci_name(device_id: str) -> str:
    """The pci.ids name of an NVIDIA device id (nfd-gpu's copy), else ``UNKNOWN_DEVICE``."""
    return tables.pci_names("nvidia").get(device_id.lower(), UNKNOWN_DEVICE)


def address_order(address: str) -> int:
    """go-nvlib's sort key of a PCI address: its hex digits read as one number."""
    return int(address.replace(":", "").replace(".", ""), 16)


def bar_memory(dev: PciDevice) -> int:
    """The 64-bit memory BARs of ``dev`` summed, rounded up to a power of two (bytes);
    0 when none is known."""
    total = sum(size for _, size, flags in dev.bars if flags & _BAR_MEMORY_TYPE == _BAR_64BIT)
    return 1 << (total - 1).bit_length() if total else 0


class VfioRefused(Exception):
    """GFD's device list fails on this node: it writes no label."""


def vfio_gpus(snap: Snapshot) -> tuple[list[Gpu], dict[str, int]]:
    """The GPUs GFD's vfio strategy labels, as the vfio manager describes them (product the
    pci.ids name, the facts above), and their BAR memory in bytes by address.

    Raises :class:`VfioRefused` where go-nvlib's device list fails (``nvpci.go:252-284``):
    a function whose vendor is not a hex id, an NVIDIA or Mellanox one whose class or
    device is not."""
    for d in snap.pci:
        if not d.vendor or (d.vendor in _LISTED_VENDORS and not (d.class_id and d.device)):
            raise VfioRefused(f"{d.address}: vendor, class or device unreadable")
    by_address = {g.address: g for g in snap.gpus}
    devs = sorted(
        (
            d
            for d in snap.pci
            if d.vendor == "10de"
            and d.class_id in GPU_CLASSES
            and not d.physfn
            and d.driver == VFIO_DRIVER
        ),
        key=lambda d: address_order(d.address),
    )
    gpus = []
    for d in devs:
        known = by_address.get(d.address)
        base = known or Gpu(d.address, "nvidia", d.vendor, d.device, d.class_id)
        gpus.append(
            dataclasses.replace(base, product=pci_name(d.device), memory_mib=None, nvidia=_NO_NVML)
        )
    return gpus, {d.address: bar_memory(d) for d in devs}


def version_labels() -> dict[str, str]:
    """``cuda.*`` of the vfio manager's fixed driver and CUDA versions (GFD
    ``internal/lm/nvml.go`` newVersionLabeler over them)."""
    return unknown_driver_version_labels(".".join(str(v) for v in CUDA_VERSION))


def unknown_driver_version_labels(cuda: str) -> dict[str, str]:
    """GFD's version labeler over the driver version its non-NVML managers (vfio, tegra)
    answer, ``unknown.unknown.unknown``, and the CUDA version ``cuda`` (``X.Y``)."""
    major, minor, rev = DRIVER_VERSION.split(".")
    cmaj, _, cmin = cuda.partition(".")
    return {
        "cuda.driver.major": major,
        "cuda.driver.minor": minor,
        "cuda.driver.rev": rev,
        "cuda.driver-version.major": major,
        "cuda.driver-version.minor": minor,
        "cuda.driver-version.revision": rev,
        "cuda.driver-version.full": DRIVER_VERSION,
        "cuda.runtime.major": cmaj,
        "cuda.runtime.minor": cmin,
        "cuda.runtime-version.major": cmaj,
        "cuda.runtime-version.minor": cmin,
        "cuda.runtime-version.full": cuda,
    }
