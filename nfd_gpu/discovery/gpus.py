"""GPU classification and identification from PCI records: the counting rules below.

A GPU is a PCI *physical function* of a GPU vendor whose class is display, 0x03, or
processing accelerator, 0x12, and that is identified as a GPU:

* class 0x03 of a registered GPU vendor is a GPU. ``discovery/registry.py`` registers
  NVIDIA, AMD, Intel.
* class 0x12 is a GPU only when the vendor table knows the device. AMD Instinct boards are
  0x1200; Intel's 0x12 NPUs are not GPUs.
* class 0x12 is a GPU too for a vendor whose every 0x12 function is one:
  ``Vendor.accelerators_are_gpus``. That is AMD: vendor 1002 only makes GPUs in that class.
* BMC and virtual VGA are other vendors: ASPEED, Matrox, QEMU, virtio, Cirrus, VMware.
  NVSwitch bridges are class 0x0680 and GPU audio is 0x0403. They are never GPUs.
* a function with a ``physfn`` link is an SR-IOV VF of a PF on this host. It is counted
  under its PF. Inside a VM the VF has no ``physfn`` and *is* the GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from nfd_gpu.catalog import tables
from nfd_gpu.discovery.passthrough import is_passthrough_driver
from nfd_gpu.discovery.pciids import PciIds, marketing_part
from nfd_gpu.discovery.source import Context, Source, Vendor
from nfd_gpu.model import Gpu, PciDevice, Snapshot
from nfd_gpu.record import replace


def is_gpu_function(dev: PciDevice, gpu_vendors: Mapping[str, Vendor]) -> bool:
    """True for a GPU function, a PF or a guest VF, before the VF-on-host check."""
    vendor = gpu_vendors.get(dev.vendor)
    if vendor is None:
        return False
    base = dev.base_class
    if base == "03":
        return True
    if base == "12":
        return vendor.accelerators_are_gpus or tables.lookup(vendor.name, dev.device) is not None
    return False


def is_nvswitch(dev: PciDevice) -> bool:
    return dev.vendor == "10de" and dev.class_id.startswith("0680")


def classify(
    pci: Iterable[PciDevice], gpu_vendors: Mapping[str, Vendor]
) -> tuple[list[PciDevice], list[PciDevice], list[str]]:
    """Split PCI functions into GPU functions, host-side VFs of GPUs, and NVSwitches."""
    gpus: list[PciDevice] = []
    vfs: list[PciDevice] = []
    switches: list[str] = []
    for dev in pci:
        if is_nvswitch(dev):
            switches.append(dev.address)
        elif is_gpu_function(dev, gpu_vendors):
            (vfs if dev.is_vf else gpus).append(dev)
    return gpus, vfs, switches


def gpu_mode(
    vendor: Vendor, driver: str | None, numvfs: int | None, vf_drivers: Iterable[str]
) -> str | None:
    """How the GPU can be used, from driver binding and VF status.

    Passthrough is any vendor's device on a driver :func:`.passthrough.is_passthrough_driver`
    names.
    """
    if is_passthrough_driver(driver):
        return "pf-passthrough"
    if driver in vendor.sriov_host_drivers:
        return "vf-passthrough"
    if numvfs and any(is_passthrough_driver(d) for d in vf_drivers):
        return "vf-passthrough"
    if driver in vendor.drivers:
        return "container"
    return None


def vfs_by_pf(vfs: list[PciDevice]) -> Callable[[PciDevice], list[PciDevice]]:
    """The host-side VFs of a PF, in scan order.

    - Those whose ``physfn`` is the PF, else those its ``virtfnN`` links name.
    - Indexed once, so a node's GPUs cost O(GPUs + VFs).
    """
    by_pf: dict[str | None, list[PciDevice]] = {}
    position = {v.address: i for i, v in enumerate(vfs)}
    for v in vfs:
        by_pf.setdefault(v.physfn, []).append(v)

    def of(dev: PciDevice) -> list[PciDevice]:
        if own := by_pf.get(dev.address):
            return own
        return [vfs[i] for i in sorted(position[a] for a in set(dev.virtfns) if a in position)]

    return of


def build_gpu(dev: PciDevice, my_vfs: list[PciDevice], pciids: PciIds, vendor: Vendor) -> Gpu:
    """A :class:`Gpu` from its PCI function, the model table and pci.ids.

    - ``my_vfs`` are its host-side VFs.
    - It holds the facts every vendor has.
    - The vendor's own sources add theirs, table facts included.
    """
    sub = f"{dev.subsystem_vendor}:{dev.subsystem_device}" if dev.subsystem_device else ""
    info = tables.lookup(vendor.name, dev.device, dev.revision, sub)
    product, provenance = _product(dev, vendor, info, pciids)
    family = info.family if info else None
    memory = info.memory_mib if info else None
    units = info.compute_units if info else None
    for name, value in (("family", family), ("memory_mib", memory), ("compute_units", units)):
        if value is not None:
            provenance[name] = "table"

    vf_drivers = tuple(sorted({v.driver or "none" for v in my_vfs}))
    numvfs = dev.sriov_numvfs
    if numvfs is None and dev.sriov_totalvfs is not None:
        numvfs = len(my_vfs)

    return Gpu(
        address=dev.address,
        vendor=vendor.name,
        vendor_id=dev.vendor,
        device_id=dev.device,
        class_id=dev.class_id,
        subsystem_vendor_id=dev.subsystem_vendor,
        subsystem_device_id=dev.subsystem_device,
        revision=dev.revision,
        product=product,
        family=family,
        memory_mib=memory,
        compute_units=units,
        driver=dev.driver,
        numa_node=dev.numa_node,
        sriov_totalvfs=dev.sriov_totalvfs,
        sriov_numvfs=numvfs,
        vfs=tuple(v.address for v in my_vfs),
        vf_drivers=vf_drivers,
        guest_vf=bool(info and info.vf),
        link=dev.link,
        drm=dev.drm,
        mode=gpu_mode(vendor, dev.driver, numvfs, vf_drivers),
        provenance=provenance,
    )


def _product(
    dev: PciDevice, vendor: Vendor, info: tables.ModelInfo | None, pciids: PciIds
) -> tuple[str, dict[str, str]]:
    """The product name and its source: the model table, else pci.ids, else the ids."""
    if info is not None and info.name:
        return info.name, {"product": "table"}
    raw = pciids.device_name(dev.vendor, dev.device)
    if not raw:
        return f"{vendor.display} Device {dev.device}", {"product": "pci"}
    part = marketing_part(raw)
    if part.lower().startswith(vendor.display.lower()):
        return part, {"product": "pci.ids"}
    return f"{vendor.display} {part}", {"product": "pci.ids"}


def source(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """The ``gpus`` source: a :class:`Gpu` per GPU function of ``gpu_vendors``, by PCI id."""

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        gpu_fns, vfs, switches = classify(snap.pci, gpu_vendors)
        ids = PciIds(ctx.host)
        vfs_of = vfs_by_pf(vfs)
        gpus = tuple(build_gpu(d, vfs_of(d), ids, gpu_vendors[d.vendor]) for d in gpu_fns)
        return replace(snap, gpus=gpus, nvswitches=tuple(switches))

    return Source("gpus", run)
