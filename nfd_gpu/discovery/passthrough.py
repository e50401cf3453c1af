"""Which PCI drivers hold a device for a VM: the one rule every part of nfd-gpu uses.

The name is the driver's, as ``sys/bus/pci/devices/<addr>/driver`` links it (the
``pci_driver.name`` it registered, Linux ``drivers/vfio/pci/``):

- ``vfio-pci``: the generic VFIO driver (``vfio_pci.c`` names itself so);
- a VFIO *variant* driver, named after its module (``KBUILD_MODNAME``: dashes become
  underscores), every one ending ``_vfio_pci``: ``nvgrace_gpu_vfio_pci`` (the GPU of an
  NVIDIA Grace Hopper / Grace Blackwell superchip), ``mlx5_vfio_pci``, ``hisi_acc_vfio_pci``,
  ``pds_vfio_pci``, ``virtio_vfio_pci``, ``qat_vfio_pci``, ``xe_vfio_pci``;
- ``pci-stub``: claims the device and does nothing (no VFIO group: QEMU's legacy
  assignment, or to keep the host's drivers off it).

GFD's ``vfio`` discovery strategy is narrower on purpose of its own: it lists only GPUs whose
driver is exactly ``vfio-pci`` (nfd_gpu.labels.nvidia_vfio).
"""

from __future__ import annotations

VFIO_PCI = "vfio-pci"
PCI_STUB = "pci-stub"
_VARIANT_SUFFIX = "_vfio_pci"


def is_vfio_driver(name: str | None) -> bool:
    """True for vfio-pci and its variant drivers: they register ``/dev/vfio/<group>``."""
    return name is not None and (name == VFIO_PCI or name.endswith(_VARIANT_SUFFIX))


def is_passthrough_driver(name: str | None) -> bool:
    """True for a driver that reserves the device for a VM: VFIO (any variant) or pci-stub."""
    return is_vfio_driver(name) or name == PCI_STUB
