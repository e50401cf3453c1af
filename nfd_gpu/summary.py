"""The node summary: one set of values describing a node's GPUs, computed from the snapshot.

- Both outputs read it: the neutral label profile and the ``gpu.node`` attribute feature.
  They are :mod:`nfd_gpu.labels.neutral`, which adds its namespace, and :mod:`nfd_gpu.featuremap`.
- Keys have no prefix; docs/labels.md documents each.
- :func:`node_summary` merges small summarisers in order, one per concern.
- A node without GPUs has an empty summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from nfd_gpu.health.signals import metric_reason
from nfd_gpu.model import Gpu, HealthReason, Snapshot
from nfd_gpu.names import NAME_MAX, LabelDoc, sanitize_value

MIXED = "mixed"


def _summary(values: Iterable[str | None]) -> str | None:
    """The common value, ``mixed`` when they differ, None when any is unknown."""
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    distinct = set(vals)
    return vals[0] if len(distinct) == 1 else MIXED


def _one_or_mixed(values: list[str]) -> str:
    """Return the value when all agree, else ``mixed``; ``values`` is not empty."""
    return values[0] if len(set(values)) == 1 else MIXED


def _min_known(gpus: Iterable[Gpu], get: Callable[[Gpu], int | None]) -> int | None:
    """Minimum over GPUs, only when every GPU knows the value."""
    vals = [get(g) for g in gpus]
    if not vals or any(v is None for v in vals):
        return None
    return min(v for v in vals if v is not None)


def _vendor_gpus(snap: Snapshot, vendor: str) -> list[Gpu]:
    return [g for g in snap.gpus if g.vendor == vendor]


def product_value(gpu: Gpu) -> str:
    return sanitize_value(gpu.product or "") or f"{gpu.vendor_id}-{gpu.device_id}"


def _counts(snap: Snapshot) -> dict[str, str]:
    """``present``, ``count``, ``vendor``, ``product`` and the per-vendor/-product counts."""
    gpus = snap.gpus
    out = {"present": "true", "count": str(len(gpus))}
    vendors = Counter(g.vendor for g in gpus)
    out["vendor"] = next(iter(vendors)) if len(vendors) == 1 else MIXED
    for v, n in sorted(vendors.items()):
        out[f"{v}.count"] = str(n)
    products = Counter(product_value(g) for g in gpus)
    out["product"] = next(iter(products)) if len(products) == 1 else MIXED
    room = NAME_MAX - len("product.") - len(".count")
    for p, n in sorted(products.items()):
        out[f"product.{sanitize_value(p, room)}.count"] = str(n)
    return out


def _architecture(snap: Snapshot) -> dict[str, str]:
    """``family``, ``memory-mib``, ``compute.*``, ``amd.gfx``, ``compute-units``,
    ``integrated``."""
    gpus = snap.gpus
    out: dict[str, str] = {}
    # different vendors never share a family: mixed, even when one of them is unknown
    family = MIXED if len({g.vendor for g in gpus}) > 1 else _summary(g.family for g in gpus)
    if family:
        out["family"] = family
    mem = _min_known(gpus, lambda g: g.memory_mib)
    if mem is not None:
        out["memory-mib"] = str(mem)
    ccs = [(g.nvidia.compute_major, g.nvidia.compute_minor) for g in _vendor_gpus(snap, "nvidia")]
    if ccs and all(a is not None and b is not None for a, b in ccs):
        major, minor = min((a or 0, b or 0) for a, b in ccs)
        out["compute.major"] = str(major)
        out["compute.minor"] = str(minor)
    gfx = _summary(g.amd.gfx for g in _vendor_gpus(snap, "amd"))
    if gfx:
        out["amd.gfx"] = gfx
    units = _min_known(gpus, lambda g: g.compute_units)
    if units is not None:
        out["compute-units"] = str(units)
    if any(g.integrated for g in gpus):
        out["integrated"] = "true"
    return out


def _drivers(snap: Snapshot) -> dict[str, str]:
    """Return ``driver`` and each vendor's ``<vendor>.driver.version`` and ``.major``.

    Those are the versions discovery recorded per vendor: ``Snapshot.vendor_driver_versions``.
    """
    out = {"driver": _summary(g.driver or "none" for g in snap.gpus) or "none"}
    for vendor, raw in sorted(snap.vendor_driver_versions.items()):
        version = sanitize_value(raw)
        if version:
            out[f"{vendor}.driver.version"] = version
            drv_major = version.split(".", 1)[0]
            if drv_major.isdigit():
                out[f"{vendor}.driver.major"] = drv_major
    return out


def _modes(snap: Snapshot) -> dict[str, str]:
    """``mode`` and ``virtualization``."""
    out: dict[str, str] = {}
    modes = [g.mode for g in snap.gpus if g.mode]
    if modes:
        out["mode"] = _one_or_mixed(modes)
    virt = _summary(g.nvidia.virtualization for g in snap.gpus)
    if virt:
        out["virtualization"] = virt
    return out


def _nvidia(snap: Snapshot) -> dict[str, str]:
    """Return ``mig.capable``, ``mig.enabled``, ``nvidia.cuda.*`` and ``nvidia.l4t.*``.

    ``nvidia.cuda.*`` is for nodes with NVIDIA GPUs, ``nvidia.l4t.*`` for a Jetson.
    """
    nv = _vendor_gpus(snap, "nvidia")
    if not nv:
        return {}
    out = {"mig.capable": "true" if any(g.nvidia.mig_capable for g in nv) else "false"}
    if any(g.nvidia.mig_enabled for g in nv):
        out["mig.enabled"] = "true"
    elif all(g.nvidia.mig_enabled is False for g in nv):
        out["mig.enabled"] = "false"
    cuda = snap.driver_versions.get("cuda", "")
    cmaj, _, cmin = cuda.partition(".")
    if cmaj.isdigit() and cmin.isdigit():
        out["nvidia.cuda.major"] = cmaj
        out["nvidia.cuda.minor"] = cmin
    l4t = snap.driver_versions.get("l4t", "")
    if l4t and any(g.integrated for g in nv):
        out["nvidia.l4t.version"] = sanitize_value(l4t)
        out["nvidia.l4t.major"] = l4t.split(".", 1)[0]
    return out


def _partitions(snap: Snapshot) -> dict[str, str]:
    """Return ``partitions`` and ``mig.<profile>.count``.

    ``partitions`` counts MIG devices and AMD partitions once.
    """
    if not snap.partitions:
        return {}
    out = {"partitions": str(len(snap.partitions))}
    profiles = Counter(
        sanitize_value(p.profile.replace("+", ".")) for p in snap.partitions if p.kind == "mig"
    )
    for prof, n in sorted(profiles.items()):
        out[f"mig.{prof}.count"] = str(n)
    return out


def _sriov(snap: Snapshot) -> dict[str, str]:
    """``sriov.capable`` and ``sriov.vfs`` over the physical functions."""
    pfs = [g for g in snap.gpus if not g.guest_vf]
    capable = any((g.sriov_totalvfs or 0) > 0 for g in pfs)
    out = {"sriov.capable": "true" if capable else "false"}
    if capable:
        out["sriov.vfs"] = str(sum(g.sriov_numvfs or 0 for g in pfs))
    return out


def _interconnects(snap: Snapshot) -> dict[str, str]:
    """``interconnect.nvswitch`` / ``.xgmi`` / ``.xelink``."""
    out: dict[str, str] = {}
    if snap.nvswitches and _vendor_gpus(snap, "nvidia"):
        out["interconnect.nvswitch"] = "true"
    if any("xgmi" in g.interconnects for g in _vendor_gpus(snap, "amd")):
        out["interconnect.xgmi"] = "true"
    if any("xe-link" in g.interconnects for g in _vendor_gpus(snap, "intel")):
        out["interconnect.xelink"] = "true"
    return out


def _amd_partition_modes(snap: Snapshot) -> dict[str, str]:
    """``partition.compute`` and ``partition.memory`` of the AMD GPUs."""
    out: dict[str, str] = {}
    amd = _vendor_gpus(snap, "amd")
    for key, get in (
        ("partition.compute", lambda g: g.amd.partition_compute),
        ("partition.memory", lambda g: g.amd.partition_memory),
    ):
        known = [v for v in map(get, amd) if v]
        if known:
            out[key] = _one_or_mixed(known)
    return out


def _pcie(snap: Snapshot) -> dict[str, str]:
    """Return the lowest ``pcie.gen`` and ``pcie.width`` the GPUs' links can do; ``pcie.degraded``.

    - What a link can do is both ends' maximum: an idle link's lower speed never changes it.
    - ``pcie.degraded``: a link trained narrower than that.
    """
    out: dict[str, str] = {}
    links = [g.link for g in snap.gpus if g.link is not None]
    gens = [gen for lk in links if (gen := lk.gen)]
    widths = [width for lk in links if (width := lk.width)]
    if gens:
        out["pcie.gen"] = str(min(gens))
    if widths:
        out["pcie.width"] = str(min(widths))
    if any(lk.degraded for lk in links):
        out["pcie.degraded"] = "true"
    return out


def _machine(snap: Snapshot) -> dict[str, str]:
    m = sanitize_value(snap.machine) if snap.machine else ""
    return {"machine": m} if m else {}


def _runtime(snap: Snapshot) -> dict[str, str]:
    """The ``runtime.*`` and ``devices.ready`` values."""
    out: dict[str, str] = {}
    rt = snap.runtime
    if rt is None:
        return out
    if rt.devices_ready is not None:
        out["devices.ready"] = "true" if rt.devices_ready else "false"
    if rt.nvidia_toolkit_config or rt.nvidia_runtime_binary:
        out["runtime.nvidia-container-toolkit"] = "true"
    if rt.cdi_kinds:
        out["runtime.cdi"] = "true"
        for kind in rt.cdi_kinds:
            vendor = sanitize_value(kind.split("/", 1)[0], NAME_MAX - len("runtime.cdi."))
            if vendor:
                out[f"runtime.cdi.{vendor}"] = "true"
    if rt.rocm_version:
        out["runtime.rocm.version"] = sanitize_value(rt.rocm_version)
        out["runtime.rocm.major"] = rt.rocm_version.split(".", 1)[0]
    if rt.opencl_icds:
        out["runtime.opencl"] = "true"
        for icd in rt.opencl_icds:
            name = sanitize_value(icd, NAME_MAX - len("runtime.opencl."))
            if name:
                out[f"runtime.opencl.{name}"] = "true"
    if rt.level_zero:
        out["runtime.level-zero"] = "true"
    return out


def reason_name(r: HealthReason) -> str:
    """Return a fault's name in labels, features and metrics.

    It is its reason, an XID as ``xid-<code>``.
    ``xid-other`` is for a code NVIDIA's catalog does not name: nfd_gpu.health.signals.
    """
    return metric_reason(r.reason, r.value)


def reason_names(gpu: Gpu) -> list[str]:
    """A GPU's counting faults, sorted: the ``health.reasons`` attribute."""
    return sorted({reason_name(r) for r in gpu.health.reasons})


# the node's health, worst first: the value of ``health`` and the states counted
_NODE_STATES = ("failed", "degraded", "no-driver", "ok")


def _health(snap: Snapshot) -> dict[str, str]:
    """Return the health values; nfd_gpu.health judges the states.

    - ``health``: the worst GPU's state; none when every GPU is unknown.
    - The counts of ``failed`` and ``degraded`` GPUs, and of GPUs with no driver bound,
      when not 0.
    - ``health.lost.count``: GPUs of the agent's first complete pass that are gone.
      They are counted as failed.
    - ``health.all-failed``: every GPU failed or lost.
    """
    states = Counter(g.health.state for g in snap.gpus)
    states["failed"] += len(snap.lost_gpus)
    state = next((s for s in _NODE_STATES if states[s]), None)
    if state is None:
        return {}
    out = {"health": state}
    for state in ("failed", "degraded"):
        if states[state]:
            out[f"health.{state}.count"] = str(states[state])
    # GPUs with no driver bound, whatever their state (an AER error may fail one)
    unbound = sum(1 for g in snap.gpus if any(r.reason == "no-driver" for r in g.health.reasons))
    if unbound:
        out["health.no-driver.count"] = str(unbound)
    if snap.lost_gpus:
        out["health.lost.count"] = str(len(snap.lost_gpus))
    if states["failed"] == len(snap.gpus) + len(snap.lost_gpus):
        out["health.all-failed"] = "true"  # no GPU of the node is left to use
    return out


# The summarisers, in the order their keys are written.
SUMMARISERS: tuple[Callable[[Snapshot], dict[str, str]], ...] = (
    _counts,
    _architecture,
    _drivers,
    _modes,
    _nvidia,
    _partitions,
    _sriov,
    _interconnects,
    _amd_partition_modes,
    _pcie,
    _machine,
    _runtime,
    _health,
)


def node_summary(snap: Snapshot) -> dict[str, str]:
    """Return the summary values keyed without namespace.

    - Empty when there is no GPU.
    - Only the health values when every GPU is lost. The taint rule still sees ``health=failed``.
    """
    if not snap.gpus:
        return _health(snap)
    out: dict[str, str] = {}
    for summarise in SUMMARISERS:
        out.update(summarise(snap))
    return out


# Every key the summary writes, documented: the neutral profile's label table
# (docs/labels.md, generated by labels/neutral.py). A new key's summariser and its row
# are both here.
LABEL_TABLE: tuple[LabelDoc, ...] = (
    LabelDoc("present", "`true`", "At least one GPU. Nodes without GPUs get no neutral label."),
    LabelDoc("count", "integer", "Physical GPUs (PFs; inside a VM, passed-through VFs)."),
    LabelDoc("vendor", "{vendors} `mixed`", "GPU vendor."),  # {vendors}: filled in
    LabelDoc("<vendor>.count", "integer", "GPUs of each vendor present."),
    LabelDoc("product", "sanitised product name or `mixed`", "e.g. `NVIDIA-H100-80GB-HBM3`."),
    LabelDoc("product.<product>.count", "integer", "GPUs of each distinct product."),
    LabelDoc(
        "family",
        "architecture or `mixed`",
        # {families}: every value of the vocabulary, filled in by render_docs (reading
        # all model tables at import cost every scan ~20 ms: families.vocabulary)
        "{families}. From the model table (NVIDIA: the compute capability as GFD's "
        "`getArchFamily`, else the pci.ids chip code's prefix, `GA` ampere, `GK` kepler, for "
        "every chip-coded id), else derived (NVIDIA: from the compute capability; AMD: from "
        "the ISA target). `mixed` when the GPUs' families "
        "differ or their vendors do (even with one family unknown); omitted when a "
        "single-vendor node has a GPU of unknown family (`scan` then warns with its ids).",
    ),
    LabelDoc(
        "memory-mib",
        "integer",
        "Smallest GPU memory on the node (MiB); omitted unless known for every GPU.",
    ),
    LabelDoc("compute.major", "integer", "NVIDIA compute capability major (smallest)."),
    LabelDoc("compute.minor", "integer", "NVIDIA compute capability minor (of the smallest)."),
    LabelDoc("amd.gfx", "e.g. `gfx942` or `mixed`", "AMD ISA target."),
    LabelDoc("compute-units", "integer", "Smallest SM / CU / Xe-core count, when known for all."),
    LabelDoc(
        "integrated",
        "`true`",
        "A GPU is a SoC's (Jetson, IGX; a platform device found from the device tree, not a "
        "PCI function), sharing the host's memory: its `memory-mib` is the host's `MemTotal` "
        "(what CUDA answers there), its `nvidia.driver.version` the L4T release under the "
        '`nvgpu` driver (docs/nvidia.md, "Jetson").',
    ),
    LabelDoc(
        "driver",
        "`nvidia` `amdgpu` `i915` `xe` `vfio-pci` `none` `mixed` ...",
        "Kernel driver bound to the GPUs.",
    ),
    LabelDoc(
        "<vendor>.driver.version",
        "e.g. `550.54.15`",
        "Kernel module version (`nvgpu`, a Jetson's: the L4T release, `36.4.3`).",
    ),
    LabelDoc("<vendor>.driver.major", "integer", "Kernel module major version."),
    LabelDoc(
        "mode",
        "`container` `pf-passthrough` `vf-passthrough` `vgpu-host` `vgpu-guest` `mixed`",
        "How the GPUs can be used: by containers through the vendor driver, passed "
        "through whole (`vfio-pci`, a `*_vfio_pci` variant such as Grace's "
        "`nvgrace_gpu_vfio_pci`, `pci-stub`), or as SR-IOV VFs handed to VMs.",
    ),
    LabelDoc(
        "virtualization",
        "`none` `passthrough` `vgpu-guest` `vgpu-host` `mixed`",
        "What the GPUs' driver says about virtualization (NVML virtualization mode; "
        "`vgpu-guest` also from the vGPU PCI capability): `passthrough` is a VM with the "
        "whole GPU passed through, `none` bare metal. Omitted unless known for every GPU. "
        "Per GPU: the `gpu.device` attribute `virtualization`.",
    ),
    LabelDoc("mig.capable", "`true` `false`", "Any NVIDIA GPU supports MIG."),
    LabelDoc(
        "mig.enabled",
        "`true` `false`",
        "Any NVIDIA GPU has MIG mode on (NVML), or has MIG instances (procfs). "
        "Omitted when unknown.",
    ),
    LabelDoc(
        "mig.<profile>.count",
        "integer",
        "MIG devices of each profile (`1g.10gb`, `1c.3g.20gb`, `1g.10gb.me`; `+` written "
        "as `.`); `unknown` when only procfs shows the instance.",
    ),
    LabelDoc(
        "partitions",
        "integer",
        "Schedulable GPU partitions on the node: NVIDIA MIG devices plus AMD compute "
        "partitions (KFD nodes of partitioned GPUs).",
    ),
    LabelDoc(
        "nvidia.cuda.major",
        "integer",
        "CUDA driver API version major (NVML; without NVML from the driver branch, "
        "see docs/nvidia.md).",
    ),
    LabelDoc("nvidia.cuda.minor", "integer", "CUDA driver API version minor (as major)."),
    LabelDoc(
        "nvidia.l4t.version",
        "e.g. `36.4.3`",
        "A Jetson's L4T (Jetson Linux) release, `etc/nv_tegra_release` (`# R36 (release), "
        "REVISION: 4.3`); JetPack 6 is L4T 36, JetPack 7 is 38 and newer.",
    ),
    LabelDoc("nvidia.l4t.major", "integer", "The L4T release's major (`36`)."),
    LabelDoc("sriov.capable", "`true` `false`", "Any GPU PF supports SR-IOV."),
    LabelDoc("sriov.vfs", "integer", "VFs enabled on GPU PFs (when SR-IOV capable)."),
    LabelDoc("interconnect.nvswitch", "`true`", "NVSwitch bridges present."),
    LabelDoc("interconnect.xgmi", "`true`", "AMD GPUs linked by XGMI (KFD io_links type 11)."),
    LabelDoc("interconnect.xelink", "`true`", "Intel GPUs with Xe Link (an `iaf` fabric device)."),
    LabelDoc(
        "partition.compute",
        "`spx` `dpx` `tpx` `qpx` `cpx` or `mixed`",
        "AMD compute partition mode (`current_compute_partition`).",
    ),
    LabelDoc(
        "partition.memory",
        "`nps1` `nps2` `nps4` `nps8` or `mixed`",
        "AMD memory partition mode (`current_memory_partition`).",
    ),
    LabelDoc(
        "pcie.gen",
        "integer",
        "Lowest PCIe generation the GPUs' links can do (the lower of the GPU's and its "
        "port's maximum; an idle link's lower speed does not change it).",
    ),
    LabelDoc("pcie.width", "integer", "Lowest PCIe link width the GPUs' links can do (as above)."),
    LabelDoc("pcie.degraded", "`true`", "Some GPU link trained narrower than both ends support."),
    LabelDoc("machine", "sanitised DMI product name", "`sys/class/dmi/id/product_name`."),
    LabelDoc(
        "devices.ready",
        "`true` `false`",
        "Every GPU's device nodes exist (render node, `/dev/kfd`, `/dev/nvidiactl` + "
        "`/dev/nvidia<N>`, or `/dev/vfio/<group>` when passed through). Without `/dev` "
        "under the root (the DaemonSet pod), DRM, KFD and VFIO nodes are derived from "
        "sysfs; omitted there on nodes with NVIDIA GPUs in container mode (docs/install.md).",
    ),
    LabelDoc(
        "runtime.nvidia-container-toolkit",
        "`true`",
        "`etc/nvidia-container-runtime/config.toml` or the runtime binary present.",
    ),
    LabelDoc("runtime.cdi", "`true`", "CDI specs in `etc/cdi` or `var/run/cdi`."),
    LabelDoc("runtime.cdi.<vendor>", "`true`", "A CDI spec of that vendor (`nvidia.com`)."),
    LabelDoc("runtime.rocm.version", "e.g. `6.2.0`", "`opt/rocm/.info/version`."),
    LabelDoc("runtime.rocm.major", "integer", "ROCm major version."),
    LabelDoc("runtime.opencl", "`true`", "OpenCL ICDs in `etc/OpenCL/vendors`."),
    LabelDoc("runtime.opencl.<icd>", "`true`", "One per ICD file (`intel`, `nvidia`, ...)."),
    LabelDoc("runtime.level-zero", "`true`", "The Level Zero loader `libze_loader.so` found."),
    LabelDoc(
        "health",
        "`ok` `no-driver` `degraded` `failed`",
        "The worst GPU's health (docs/health.md): `failed` (an uncorrectable memory error, a "
        "pending row remap or page retirement, a fatal XID, a fatal PCIe error, a GPU the "
        "driver has but cannot use, a GPU lost...), `degraded` (hardware clock slowdown, "
        "NVLink down, ...), `no-driver` (a GPU with no driver bound), `ok` (a signal of the "
        "GPU itself was read and every signal read is clear). Omitted when nothing of any GPU "
        "could be read. Per GPU: the `gpu.device` attributes `health` and `health.reasons`.",
    ),
    LabelDoc("health.failed.count", "integer", "GPUs whose health is `failed` (when not 0)."),
    LabelDoc("health.degraded.count", "integer", "GPUs whose health is `degraded` (when not 0)."),
    LabelDoc(
        "health.no-driver.count",
        "integer",
        "GPUs with no driver bound (when not 0): the shipped taint rule does not fire then.",
    ),
    LabelDoc(
        "health.lost.count",
        "integer",
        "GPUs of the agent's first complete pass that are gone from the node (fell off the "
        "bus), until they return or the node reboots (kept across restarts of the agent); "
        "counted in `health.failed.count` "
        "(agent only; when not 0). Written, with `health`, even when every GPU is gone.",
    ),
    LabelDoc(
        "health.all-failed",
        "`true`",
        "Every GPU of the node is `failed` or lost: none is left to use (what the shipped "
        "taint rule taints on; docs/health.md).",
    ),
)
