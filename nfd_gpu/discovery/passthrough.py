"""Which PCI drivers hold a device for a VM: the one rule every part of nfd-gpu uses.

The name is the driver's, as ``sys/bus/pci/devices/<addr>/driver`` links it.
That is the ``pci_driver.name`` it registered; see Linux ``drivers/vfio/pci/``.

- ``vfio-pci``: the generic VFIO driver; ``vfio_pci.c`` names itself so.
- A VFIO *variant* driver, named after its module by ``KBUILD_MODNAME``.
  Dashes become underscores, and every one ends ``_vfio_pci``.
  Examples: ``nvgrace_gpu_vfio_pci``, ``mlx5_vfio_pci``, ``hisi_acc_vfio_pci``,
  ``pds_vfio_pci``, ``virtio_vfio_pci``, ``qat_vfio_pci``, ``xe_vfio_pci``.
  ``nvgrace_gpu_vfio_pci`` drives the GPU of an NVIDIA Grace Hopper or Grace Blackwell superchip.
- ``pci-stub``: claims the device and does nothing; there is no VFIO group.
  It is used for QEMU's legacy assignment, or to keep the host's drivers off the device.

GFD's ``vfio`` discovery strategy is narrower, on purpose of its own.
It lists only GPUs whose driver is exactly ``vfio-pci``: see nfd_gpu.labels.nvidia_vfio.
"""

from __future__ import annotations

VFIO_PCI = "vfio-pci"
PCI_STUB = "pci-stub"
_VARIANT_SUFFIX = "_vfio_pci"


def is_vfio_driver(name: str | None) -> bool:
    """Tell vfio-pci and its variant drivers: they register ``/dev/vfio/<group>``."""
    return name is not None and (name == VFIO_PCI or name.endswith(_VARIANT_SUFFIX))


def is_passthrough_driver(name: str | None) -> bool:
    """Tell a driver that reserves the device for a VM: VFIO, any variant, or pci-stub."""
    return is_vfio_driver(name) or name == PCI_STUB
