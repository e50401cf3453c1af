"""GPU classification and identification from PCI records (LABELS.md "Counting rules").

A GPU is a PCI *physical function* of a GPU vendor whose class is display
(0x03) or processing accelerator (0x12) and that is identified as a GPU:

* class 0x03 of NVIDIA, AMD or Intel is a GPU;
* class 0x12 is a GPU only when the vendor table knows the device (AMD
  Instinct boards are 0x1200; Intel's 0x12 NPUs are not GPUs), or for AMD
  (vendor 1002 only makes GPUs in that class);
* BMC / virtual VGA (ASPEED, Matrox, QEMU, virtio, Cirrus, VMware) are other
  vendors, NVSwitch bridges are class 0x0680 and GPU audio is 0x0403: never GPUs;
* a function with a ``physfn`` link is an SR-IOV VF of a PF on this host and is
  counted under its PF; inside a VM the VF has no ``physfn`` and *is* the GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from nfd_gpu import tables
from nfd_gpu.discovery.pci import GPU_VENDOR_IDS
from nfd_gpu.discovery.pciids import PciIds, marketing_part
from nfd_gpu.discovery.source import Context, Step
from nfd_gpu.model import Gpu, PciDevice, Snapshot

# Drivers that give containers access to the GPU.
VENDOR_DRIVERS = frozenset({"nvidia", "amdgpu", "i915", "xe", "nouveau", "radeon"})
# Drivers that reserve the device for a VM.
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})
# Host-side SR-IOV drivers that hand VFs to VMs (AMD MxGPU).
SRIOV_HOST_DRIVERS = frozenset({"gim"})

_VENDOR_DISPLAY = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel"}


def is_gpu_function(dev: PciDevice) -> bool:
    """True for a GPU function (PF or guest VF), before the VF-on-host check."""
    vendor = GPU_VENDOR_IDS.get(dev.vendor)
    if vendor is None:
        return False
    base = dev.base_class
    if base == "03":
        return True
    if base == "12":
        return vendor == "amd" or tables.lookup(vendor, dev.device) is not None
    return False


def is_nvswitch(dev: PciDevice) -> bool:
    return dev.vendor == "10de" and dev.class_id.startswith("0680")


def classify(pci: Iterable[PciDevice]) -> tuple[list[PciDevice], list[PciDevice], list[str]]:
    """Split PCI functions into (GPU functions, host-side VFs of GPUs, NVSwitches)."""
    gpus: list[PciDevice] = []
    vfs: list[PciDevice] = []
    switches: list[str] = []
    for dev in pci:
        if is_nvswitch(dev):
            switches.append(dev.address)
        elif is_gpu_function(dev):
            (vfs if dev.is_vf else gpus).append(dev)
    return gpus, vfs, switches


def gpu_mode(driver: str | None, numvfs: int | None, vf_drivers: Iterable[str]) -> str | None:
    """How the GPU can be used, from driver binding and VF status."""
    vf_drivers = set(vf_drivers)
    if driver in PASSTHROUGH_DRIVERS:
        return "pf-passthrough"
    if driver in SRIOV_HOST_DRIVERS:
        return "vf-passthrough"
    if numvfs and vf_drivers & PASSTHROUGH_DRIVERS:
        return "vf-passthrough"
    if driver in VENDOR_DRIVERS:
        return "container"
    return None


def build_gpu(dev: PciDevice, vfs: list[PciDevice], pciids: PciIds) -> Gpu:
    """A :class:`Gpu` from its PCI function, the model table and pci.ids."""
    vendor = GPU_VENDOR_IDS[dev.vendor]
    info = tables.lookup(vendor, dev.device, dev.revision)
    sources: dict[str, str] = {}

    product: str | None = None
    if info is not None and info.name:
        product = info.name
        sources["product"] = "table"
    else:
        raw = pciids.device_name(dev.vendor, dev.device)
        if raw:
            part = marketing_part(raw)
            prefix = _VENDOR_DISPLAY[vendor]
            product = part if part.lower().startswith(prefix.lower()) else f"{prefix} {part}"
            sources["product"] = "pci.ids"
        else:
            product = f"{_VENDOR_DISPLAY[vendor]} Device {dev.device}"
            sources["product"] = "pci"

    def from_table(name: str, value: object) -> None:
        if value is not None:
            sources[name] = "table"

    family = info.family if info else None
    from_table("family", family)
    memory = info.memory_mib if info else None
    from_table("memory_mib", memory)
    major = info.compute_major if info else None
    minor = info.compute_minor if info else None
    from_table("compute_capability", major)
    units = info.compute_units if info else None
    from_table("compute_units", units)
    gfx = info.gfx if info else None
    from_table("gfx", gfx)
    mig_capable = info.mig_capable if (info and vendor == "nvidia") else None
    if vendor == "nvidia" and mig_capable is None:
        mig_capable = False
    from_table("mig_capable", info.mig_capable if info else None)

    my_vfs = [v for v in vfs if v.physfn == dev.address] or [
        v for v in vfs if v.address in dev.virtfns
    ]
    vf_drivers = tuple(sorted({v.driver or "none" for v in my_vfs}))
    numvfs = dev.sriov_numvfs
    if numvfs is None and dev.sriov_totalvfs is not None:
        numvfs = len(my_vfs)

    return Gpu(
        address=dev.address,
        vendor=vendor,
        vendor_id=dev.vendor,
        device_id=dev.device,
        class_id=dev.class_id,
        subsystem_vendor_id=dev.subsystem_vendor,
        subsystem_device_id=dev.subsystem_device,
        revision=dev.revision,
        product=product,
        family=family,
        memory_mib=memory,
        compute_major=major,
        compute_minor=minor,
        gfx=gfx,
        compute_units=units,
        mig_capable=mig_capable,
        driver=dev.driver,
        numa_node=dev.numa_node,
        sriov_totalvfs=dev.sriov_totalvfs,
        sriov_numvfs=numvfs,
        vfs=tuple(v.address for v in my_vfs),
        vf_drivers=vf_drivers,
        guest_vf=bool(info and info.vf),
        link=dev.link,
        drm=dev.drm,
        mode=gpu_mode(dev.driver, numvfs, vf_drivers),
        sources=sources,
    )


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpu_fns, vfs, switches = classify(snap.pci)
    ids = PciIds(ctx.host)
    gpus = tuple(build_gpu(d, vfs, ids) for d in gpu_fns)
    return dataclasses.replace(snap, gpus=gpus, nvswitches=tuple(switches))


SOURCE = Step("gpus", _discover)
