"""Snapshot -> NFD features, all values strings.

The features: ``gpu.device``, ``gpu.partition``, ``gpu.node``, ``pci.device``,
``kernel.loadedmodule``.
"""

from __future__ import annotations

from collections.abc import Mapping

from nfd_gpu import features
from nfd_gpu.model import Gpu, PciDevice, Runtime, Snapshot
from nfd_gpu.summary import node_summary, reason_names


def _s(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def gpu_instance(g: Gpu) -> dict[str, str]:
    raw: Mapping[str, object] = {
        "address": g.address,
        "vendor": g.vendor,
        "vendor_id": g.vendor_id,
        "device_id": g.device_id,
        "class": g.class_id[:4],
        "subsystem_vendor_id": g.subsystem_vendor_id,
        "subsystem_device_id": g.subsystem_device_id,
        "revision": g.revision,
        "product": g.product,
        "family": g.family,
        "memory_mib": g.memory_mib,
        "compute_major": g.nvidia.compute_major,
        "compute_minor": g.nvidia.compute_minor,
        "gfx": g.amd.gfx,
        "compute_units": g.compute_units,
        "driver": g.driver or "none",
        "numa_node": g.numa_node,
        "mig_capable": g.nvidia.mig_capable,
        "mig_enabled": g.nvidia.mig_enabled,
        "sriov_totalvfs": g.sriov_totalvfs,
        "sriov_numvfs": g.sriov_numvfs,
        "virtual": g.guest_vf,
        "pcie_gen": g.link.current_gen if g.link else None,
        "pcie_width": g.link.current_width if g.link else None,
        "partition_compute": g.amd.partition_compute,
        "partition_memory": g.amd.partition_memory,
        "mode": g.mode,
        "virtualization": g.nvidia.virtualization,
        "uuid": g.uuid,
        "tiles": g.intel.tiles,
        "interconnects": ".".join(g.interconnects) or None,
        "health": g.health.state,
        "health.reasons": ".".join(reason_names(g)) or None,
    }
    return {k: s for k, v in raw.items() if (s := _s(v)) is not None and s != ""}


PCI_DEVICE = "pci.device"
# the pci.device attributes only NFD's features carry, read only when something sees them
# (discovery/pci.py ``nfd_attributes``): a scan printing features, a rule naming one
NFD_ONLY_PCI = ("iommu_group/type", "iommu/intel-iommu/version")


def pci_instance(d: PciDevice) -> dict[str, str]:
    """Return NFD's own ``pci.device`` shape: class cut to 4 hex digits, ids without ``0x``."""
    out = {
        "class": d.class_id[:4],
        "vendor": d.vendor,
        "device": d.device,
        "subsystem_vendor": d.subsystem_vendor,
        "subsystem_device": d.subsystem_device,
    }
    if d.sriov_totalvfs is not None:
        out["sriov_totalvfs"] = str(d.sriov_totalvfs)
    if d.iommu_type is not None:
        out[NFD_ONLY_PCI[0]] = d.iommu_type
    if d.intel_iommu_version is not None:
        out[NFD_ONLY_PCI[1]] = d.intel_iommu_version
    out.update(d.nfd_raw)  # malformed values as NFD keeps them
    return out


def runtime_flags(rt: Runtime) -> list[str]:
    """Return the ``gpu.runtime`` flag feature: the runtime pieces found."""
    out = []
    if rt.nvidia_toolkit_config:
        out.append("nvidia-container-toolkit")
    if rt.nvidia_runtime_binary:
        out.append("nvidia-container-runtime")
    out += [f"cdi.{k}" for k in rt.cdi_kinds]
    if rt.rocm_version:
        out.append("rocm")
    out += [f"opencl.{i}" for i in rt.opencl_icds]
    if rt.level_zero:
        out.append("level-zero")
    if any(n.path == "dev/kfd" for n in rt.device_nodes):
        out.append("dev.kfd")
    if any(n.path.startswith("dev/dri/renderD") for n in rt.device_nodes):
        out.append("dev.dri.render")
    if any(n.path == "dev/nvidiactl" for n in rt.device_nodes):
        out.append("dev.nvidiactl")
    if rt.devices_ready:
        out.append("devices-ready")
    return out


def snapshot_features(snap: Snapshot) -> features.Features:
    feats = features.empty()
    features.add_instances(feats, "gpu.device", (gpu_instance(g) for g in snap.gpus))
    features.add_instances(
        feats,
        "gpu.partition",
        (
            {
                k: v
                for k, v in {
                    "parent": p.parent,
                    "kind": p.kind,
                    "profile": p.profile,
                    "index": str(p.index),
                    "memory_mib": _s(p.memory_mib),
                    "compute_units": _s(p.compute_units),
                    "uuid": p.uuid,
                    "slices_gi": _s(p.slices_gi),
                    "slices_ci": _s(p.slices_ci),
                    "engines_copy": _s(p.engines_copy),
                    "engines_decoder": _s(p.engines_decoder),
                    "engines_encoder": _s(p.engines_encoder),
                    "engines_jpeg": _s(p.engines_jpeg),
                    "engines_ofa": _s(p.engines_ofa),
                }.items()
                if v is not None
            }
            for p in snap.partitions
        ),
    )
    features.add_instances(
        feats,
        "gpu.vgpu_type",
        (
            {
                k: v
                for k, v in {
                    "parent": t.parent,
                    "type": t.type,
                    "name": t.name,
                    "available_instances": _s(t.available_instances),
                    "device_api": t.device_api,
                }.items()
                if v is not None
            }
            for t in snap.vgpu_types
        ),
    )
    if snap.runtime is not None:
        features.add_flags(feats, "gpu.runtime", runtime_flags(snap.runtime))
    features.add_attributes(feats, "gpu.node", node_summary(snap))
    features.add_instances(feats, PCI_DEVICE, (pci_instance(d) for d in snap.pci))
    features.add_flags(feats, "kernel.loadedmodule", snap.loaded_modules)
    # NFD: enabledmodule = loaded + built in (modules.builtin)
    features.add_flags(feats, "kernel.enabledmodule", snap.loaded_modules + snap.builtin_modules)
    # Drop empty feature sets: NFD omits features that have no elements.
    for kind in ("flags", "attributes", "instances"):
        for name in [n for n, fs in feats[kind].items() if not fs["elements"]]:
            del feats[kind][name]
    return feats
