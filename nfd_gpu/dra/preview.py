"""The devices each vendor's DRA driver would publish for a node, built from nfd-gpu's facts.

- They are in the driver's attribute shape: see ../shared/reference/dra-attributes.md.
- It is a **preview**: the driver's own ResourceSlice is authoritative.
- Attributes nfd-gpu has no fact for are left out, never guessed.
  Those are NVIDIA's ``brand``, AMD's libdrm ``family``, and Intel's ``model`` and
  ``family`` from Intel's table.

Per driver:

- ``gpu.nvidia.com``: GPUs bound to ``nvidia``, type ``gpu``.
  MIG-enabled GPUs appear as their MIG devices, type ``mig``.
  GPUs on ``vfio-pci`` are type ``vfio``.
  Failed GPUs are left out: the driver drops unhealthy devices.
- ``gpu.amd.com``: GPUs bound to ``amdgpu``, type ``amdgpu``.
  Partitioned GPUs appear as their partitions, type ``amdgpu-partition``.
- ``gpu.intel.com``: GPUs bound to ``i915`` or ``xe``, type ``gpu``; VFs inside a VM are ``vf``.
  They carry ``health``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.model import Gpu, Partition, Snapshot

Obj = dict[str, Any]
DRIVERS = {"nvidia": "gpu.nvidia.com", "amd": "gpu.amd.com", "intel": "gpu.intel.com"}
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
INTEL_HEALTH = {"ok": "Healthy", "degraded": "Healthy", "failed": "Unhealthy"}


@dataclass(frozen=True)
class Device:
    """One device as a driver would publish it, with the GPU and partition behind it."""

    driver: str
    name: str
    attributes: dict[str, Obj]  # name -> {"string"|"int"|"bool"|"version": value}
    capacity: dict[str, Obj] = field(default_factory=dict)  # name -> {"value": quantity}
    gpu: Gpu | None = None
    partition: Partition | None = None

    @property
    def device_class(self) -> str:
        """Return the DeviceClass that offers it.

        - NVIDIA's is by type: ``gpu.nvidia.com``, ``mig.nvidia.com``, ``vfio.gpu.nvidia.com``.
        - The other vendors have one per driver.
        """
        kind = self.attributes.get("type", {}).get("string")
        if self.driver != DRIVERS["nvidia"] or kind == "gpu":
            return self.driver
        return "mig.nvidia.com" if kind == "mig" else "vfio.gpu.nvidia.com"

    def api(self) -> Obj:
        """Return the ``resource.k8s.io/v1`` Device."""
        out: Obj = {"name": self.name, "attributes": self.attributes}
        if self.capacity:
            out["capacity"] = self.capacity
        return out


def version(text: str | None) -> str | None:
    """Write a driver version as semver: ``535.104.05`` -> ``535.104.5``; two parts get ``.0``."""
    if not text:
        return None
    parts = text.strip().split(".")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    nums = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(nums)


def nvidia_architecture(family: str | None) -> str | None:
    """Map a family label value to go-nvlib's architecture: ``ada-lovelace`` -> ``Ada Lovelace``."""
    if not family:
        return None
    return " ".join(w.capitalize() for w in family.split("-"))


def amd_product(g: Gpu) -> str | None:
    """Return AMD's ``productName``: sysfs ``product_name`` with spaces as underscores."""
    name = g.amd.board_product or g.product
    return "_".join(name.split()) if name else None


def _s(v: object) -> Obj:
    return {"string": str(v)}


def _put(attrs: dict[str, Obj], name: str, kind: str, value: object) -> None:
    if value is not None and value != "":
        attrs[name] = {kind: value}


def _mem(mib: int | None) -> dict[str, Obj]:
    return {"memory": {"value": f"{mib}Mi"}} if mib else {}


def _nvidia_common(g: Gpu, snap: Snapshot) -> dict[str, Obj]:
    attrs: dict[str, Obj] = {}
    _put(attrs, "productName", "string", g.product)
    _put(attrs, "architecture", "string", nvidia_architecture(g.family))
    cc = g.nvidia
    if cc.compute_major is not None and cc.compute_minor is not None:
        _put(attrs, "cudaComputeCapability", "version", f"{cc.compute_major}.{cc.compute_minor}.0")
    _put(attrs, "driverVersion", "version", version(snap.vendor_driver_versions.get("nvidia")))
    _put(attrs, PCI_BUS_ID, "string", g.address)
    if g.numa_node is not None and g.numa_node >= 0:
        attrs["resource.kubernetes.io/numaNode"] = {"int": g.numa_node}
    return attrs


def _nvidia(snap: Snapshot) -> Iterator[Device]:
    for i, g in enumerate(x for x in snap.gpus if x.vendor == "nvidia"):
        if g.health.state == "failed":
            continue
        if g.driver == "vfio-pci":
            attrs = {"type": _s("vfio"), "deviceID": _s(f"0x{g.device_id}")}
            attrs["vendorID"] = _s(f"0x{g.vendor_id}")
            _put(attrs, "productName", "string", g.product)
            _put(attrs, PCI_BUS_ID, "string", g.address)
            yield Device("gpu.nvidia.com", f"gpu-vfio-{i}", attrs, {}, g)
            continue
        if g.driver != "nvidia":
            continue
        migs = [p for p in snap.partitions if p.kind == "mig" and p.parent == g.address]
        if not g.nvidia.mig_enabled or not migs:
            attrs = {"type": _s("gpu"), **_nvidia_common(g, snap)}
            _put(attrs, "uuid", "string", g.uuid)
            yield Device("gpu.nvidia.com", f"gpu-{i}", attrs, _mem(g.memory_mib), g)
            continue
        for p in migs:
            attrs = {"type": _s("mig"), **_nvidia_common(g, snap), "profile": _s(p.profile)}
            _put(attrs, "uuid", "string", p.uuid)
            _put(attrs, "parentUUID", "string", g.uuid)
            name = f"gpu-{i}-mig-{p.index}"
            yield Device("gpu.nvidia.com", name, attrs, _mem(p.memory_mib), g, p)


def _amd(snap: Snapshot) -> Iterator[Device]:
    for i, g in enumerate(x for x in snap.gpus if x.vendor == "amd"):
        if g.driver != "amdgpu":
            continue
        common: dict[str, Obj] = {}
        _put(common, "productName", "string", amd_product(g))
        _put(common, "deviceID", "string", f"0x{g.device_id}")
        _put(common, "driverVersion", "version", version(snap.vendor_driver_versions.get("amd")))
        parts = [p for p in snap.partitions if p.kind == "amd" and p.parent == g.address]
        if len(parts) <= 1:
            attrs = {"type": _s("amdgpu"), "pciAddr": _s(g.address), **common}
            cap = _mem(g.memory_mib)
            if g.compute_units:
                cap["computeUnits"] = {"value": str(g.compute_units)}
            yield Device("gpu.amd.com", f"gpu-{i}", attrs, cap, g)
            continue
        profile = f"{g.amd.partition_compute}_{g.amd.partition_memory}"
        for p in parts:
            attrs = {"type": _s("amdgpu-partition"), "parentPciAddr": _s(g.address), **common}
            attrs["partitionProfile"] = _s(profile)
            cap = _mem(p.memory_mib)
            if p.compute_units:
                cap["computeUnits"] = {"value": str(p.compute_units)}
            yield Device("gpu.amd.com", f"gpu-{i}-partition-{p.index}", attrs, cap, g, p)


def _intel(snap: Snapshot) -> Iterator[Device]:
    for i, g in enumerate(x for x in snap.gpus if x.vendor == "intel"):
        if g.driver not in ("i915", "xe"):
            continue
        attrs = {"type": _s("vf" if g.guest_vf else "gpu"), "driver": _s(g.driver)}
        attrs["pciId"] = _s(f"0x{g.device_id}")
        attrs["sriov"] = {"bool": bool(g.sriov_totalvfs)}
        attrs["health"] = _s(INTEL_HEALTH.get(g.health.state, "Unknown"))
        _put(attrs, PCI_BUS_ID, "string", g.address)
        yield Device("gpu.intel.com", f"gpu-{i}", attrs, _mem(g.memory_mib), g)


def devices(snap: Snapshot) -> list[Device]:
    """Return every driver's preview devices for the node: NVIDIA's, AMD's, then Intel's."""
    return [*_nvidia(snap), *_amd(snap), *_intel(snap)]


def preview_document(snap: Snapshot) -> Obj:
    """Build ``scan --format dra-preview``: per driver, the devices of a would-be slice."""
    by_driver: dict[str, list[Obj]] = {}
    for d in devices(snap):
        by_driver.setdefault(d.driver, []).append(d.api())
    return {
        "preview": True,
        "note": (
            "a preview from nfd-gpu's facts, in each DRA driver's attribute shape: the "
            "driver's own ResourceSlice is authoritative; nothing here is written to the API"
        ),
        "drivers": [{"driver": k, "devices": v} for k, v in by_driver.items()],
    }
