"""GFD's opt-in ``vfio`` device discovery strategy: ``flags.deviceDiscoveryStrategy: vfio``.

It labels the GPUs of a virtualisation host, bound to ``vfio-pci`` for passthrough, from PCI
alone. That is what NVIDIA/k8s-device-plugin v0.19.0's vfio resource manager does, in
``internal/resource/sysfs-lib.go`` and ``sysfs-device.go``.
Its device list is go-nvlib's ``nvpci.GetGPUs``.

- The GPUs: NVIDIA functions of PCI class ``0x030000`` or ``0x030200`` that are not SR-IOV
  VFs and are bound to ``vfio-pci``. See ``sysfs-lib.go:48-64``.
- They come in PCI address order, the address read as one hex number, as go-nvlib sorts.
  See ``nvpci.go:223-232``.
  So a 5- to 8-digit domain, such as VMD's ``10000:01:00.0``, sorts after ``2000:01:00.0``.
- Product: the pci.ids device name, ``UNKNOWN_DEVICE`` for an id the list lacks.
  See ``sysfs-device.go:50-52`` and go-nvlib's ``nvpci.go:342-348``.
- nfd-gpu's copy of the names is ``data/nvidia-pci-names.tsv``: Debian's pci.ids 2026.10.24.
  See tests/data/ids/README.md.
  GFD's image has no pci.ids, so GFD names from the copy built into go-nvlib: pci.ids 2025.07.11.
- Memory: the 64-bit memory BARs summed and rounded up to a power of two, in bytes.
  None when no BAR is known.
  GFD writes go-nvlib's ``GetTotalAddressableMemory`` value as ``gpu.memory``.
  See ``sysfs-device.go:55-58`` and ``nvpci/resources.go:89-139``.
- Compute capability ``-1.-1``, so family ``undefined``. See ``sysfs-device.go:35-37``.
- No MIG, no fabric.
- Driver version ``unknown.unknown.unknown`` and CUDA ``0.0``. See ``sysfs-lib.go:67-74``.
"""

from __future__ import annotations

from nfd_gpu.catalog import tables
from nfd_gpu.model import Gpu, NvidiaGpu, PciDevice, Snapshot
from nfd_gpu.record import replace

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
    """Return nfd-gpu's pci.ids name of an NVIDIA device id, else ``UNKNOWN_DEVICE``."""
    return tables.pci_names("nvidia").get(device_id.lower(), UNKNOWN_DEVICE)


def address_order(address: str) -> int:
    """go-nvlib's sort key of a PCI address: its hex digits read as one number."""
    return int(address.replace(":", "").replace(".", ""), 16)


def bar_memory(dev: PciDevice) -> int:
    """Return the 64-bit memory BARs of ``dev`` summed, rounded up to a power of two, in bytes.

    0 when none is known.
    """
    total = sum(size for _, size, flags in dev.bars if flags & _BAR_MEMORY_TYPE == _BAR_64BIT)
    return 1 << (total - 1).bit_length() if total else 0


class VfioRefused(Exception):
    """GFD's device list fails on this node: it writes no label."""


def vfio_gpus(snap: Snapshot) -> tuple[list[Gpu], dict[str, int]]:
    """Return the GPUs GFD's vfio strategy labels, and their BAR memory in bytes by address.

    - The GPUs are as the vfio manager describes them: the pci.ids name as product,
      and the facts above.
    - Raises :class:`VfioRefused` where go-nvlib's device list fails. See ``nvpci.go:252-284``.
    - It fails on a function whose vendor is not a hex id.
      It fails too on an NVIDIA or Mellanox one whose class or device is not.
    """
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
        gpus.append(replace(base, product=pci_name(d.device), memory_mib=None, nvidia=_NO_NVML))
    return gpus, {d.address: bar_memory(d) for d in devs}


def version_labels() -> dict[str, str]:
    """Return ``cuda.*`` of the vfio manager's fixed driver and CUDA versions.

    That is GFD's newVersionLabeler of ``internal/lm/nvml.go`` over them.
    """
    return unknown_driver_version_labels(".".join(str(v) for v in CUDA_VERSION))


def unknown_driver_version_labels(cuda: str) -> dict[str, str]:
    """Run GFD's version labeler over what its non-NVML managers answer.

    - The managers are vfio and tegra.
    - The driver version they answer is ``unknown.unknown.unknown``.
    - The CUDA version is ``cuda``, as ``X.Y``.
    """
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
