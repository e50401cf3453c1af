"""The vendor-neutral label profile (the public contract of LABELS.md).

``neutral_attributes(snapshot)`` computes the values without a prefix; they are
also published as the ``gpu.node`` attribute feature. ``neutral_labels`` adds
the namespace. ``LABEL_TABLE`` documents every key and generates docs/labels.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from nfd_gpu.labels.profile import LabelDoc, LabelProfile, table_rows
from nfd_gpu.labels.validate import NAME_MAX, sanitize_value
from nfd_gpu.model import Gpu, Runtime, Snapshot

NAMESPACE = "gpu.feature.node.kubernetes.io"
MIXED = "mixed"


LABEL_TABLE: tuple[LabelDoc, ...] = (
    LabelDoc("present", "`true`", "At least one GPU. Nodes without GPUs get no neutral label."),
    LabelDoc("count", "integer", "Physical GPUs (PFs; inside a VM, passed-through VFs)."),
    LabelDoc("vendor", "`nvidia` `amd` `intel` `mixed`", "GPU vendor."),
    LabelDoc("<vendor>.count", "integer", "GPUs of each vendor present."),
    LabelDoc("product", "sanitised product name or `mixed`", "e.g. `NVIDIA-H100-80GB-HBM3`."),
    LabelDoc("product.<product>.count", "integer", "GPUs of each distinct product."),
    LabelDoc(
        "family",
        "architecture or `mixed`",
        "`volta` `turing` `ampere` `ada-lovelace` `hopper` `blackwell`; `gcn5` `cdna1` "
        "`cdna2` `cdna3` `cdna4` `rdna2` `rdna3` `rdna4`; `xe-lp` `xe-lpg` `xe-hpg` "
        "`xe-hpc` `xe2`. Omitted when unknown for any GPU.",
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
        "driver",
        "`nvidia` `amdgpu` `i915` `xe` `vfio-pci` `none` `mixed` ...",
        "Kernel driver bound to the GPUs.",
    ),
    LabelDoc("<vendor>.driver.version", "e.g. `550.54.15`", "Kernel module version."),
    LabelDoc("<vendor>.driver.major", "integer", "Kernel module major version."),
    LabelDoc(
        "mode",
        "`container` `pf-passthrough` `vf-passthrough` `vgpu-host` `vgpu-guest` `mixed`",
        "How the GPUs can be used: by containers through the vendor driver, passed "
        "through whole (vfio-pci), or as SR-IOV VFs handed to VMs.",
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
    LabelDoc("pcie.gen", "integer", "Lowest negotiated PCIe generation over the GPUs."),
    LabelDoc("pcie.width", "integer", "Lowest negotiated PCIe link width over the GPUs."),
    LabelDoc("pcie.degraded", "`true`", "Some GPU link trained below its maximum."),
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
)

# Kernel modules whose version is the vendor's driver version, in order of preference.
_VENDOR_MODULE: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia",),
    "amd": ("amdgpu",),
    "intel": ("i915", "xe"),
}


def _summary(values: Iterable[str | None]) -> str | None:
    """The common value, ``mixed`` when they differ, None when any is unknown."""
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    distinct = set(vals)
    return vals[0] if len(distinct) == 1 else MIXED


def _min_known(gpus: Iterable[Gpu], get: Callable[[Gpu], int | None]) -> int | None:
    """Minimum over GPUs, only when every GPU knows the value."""
    vals = [get(g) for g in gpus]
    if not vals or any(v is None for v in vals):
        return None
    return min(v for v in vals if v is not None)


def product_value(gpu: Gpu) -> str:
    return sanitize_value(gpu.product or "") or f"{gpu.vendor_id}-{gpu.device_id}"


def neutral_attributes(snap: Snapshot) -> dict[str, str]:
    """Neutral label values keyed without namespace. Empty when there is no GPU."""
    gpus = snap.gpus
    if not gpus:
        return {}
    out: dict[str, str] = {"present": "true", "count": str(len(gpus))}

    vendors = Counter(g.vendor for g in gpus)
    out["vendor"] = next(iter(vendors)) if len(vendors) == 1 else MIXED
    for v, n in sorted(vendors.items()):
        out[f"{v}.count"] = str(n)

    products = Counter(product_value(g) for g in gpus)
    out["product"] = next(iter(products)) if len(products) == 1 else MIXED
    room = NAME_MAX - len("product.") - len(".count")
    for p, n in sorted(products.items()):
        out[f"product.{sanitize_value(p, room)}.count"] = str(n)

    family = _summary(g.family for g in gpus)
    if family:
        out["family"] = family

    mem = _min_known(gpus, lambda g: g.memory_mib)
    if mem is not None:
        out["memory-mib"] = str(mem)

    nv = [g for g in gpus if g.vendor == "nvidia"]
    ccs = [(g.nvidia.compute_major, g.nvidia.compute_minor) for g in nv]
    if ccs and all(a is not None and b is not None for a, b in ccs):
        major, minor = min((a or 0, b or 0) for a, b in ccs)
        out["compute.major"] = str(major)
        out["compute.minor"] = str(minor)

    amd = [g for g in gpus if g.vendor == "amd"]
    gfx = _summary(g.amd.gfx for g in amd)
    if gfx:
        out["amd.gfx"] = gfx

    units = _min_known(gpus, lambda g: g.compute_units)
    if units is not None:
        out["compute-units"] = str(units)

    out["driver"] = _summary(g.driver or "none" for g in gpus) or "none"
    for vendor in sorted(vendors):
        version = _driver_version(snap, vendor)
        if version:
            out[f"{vendor}.driver.version"] = version
            drv_major = version.split(".", 1)[0]
            if drv_major.isdigit():
                out[f"{vendor}.driver.major"] = drv_major

    modes = [g.mode for g in gpus if g.mode]
    if modes:
        out["mode"] = modes[0] if len(set(modes)) == 1 else MIXED
    virt = _summary(g.nvidia.virtualization for g in gpus)
    if virt:
        out["virtualization"] = virt

    if nv:
        out["mig.capable"] = "true" if any(g.nvidia.mig_capable for g in nv) else "false"
        if any(g.nvidia.mig_enabled for g in nv):
            out["mig.enabled"] = "true"
        elif all(g.nvidia.mig_enabled is False for g in nv):
            out["mig.enabled"] = "false"
        cuda = snap.driver_versions.get("cuda", "")
        cmaj, _, cmin = cuda.partition(".")
        if cmaj.isdigit() and cmin.isdigit():
            out["nvidia.cuda.major"] = cmaj
            out["nvidia.cuda.minor"] = cmin
    if snap.partitions:  # MIG devices and AMD partitions, counted once
        out["partitions"] = str(len(snap.partitions))
        profiles = Counter(
            sanitize_value(p.profile.replace("+", ".")) for p in snap.partitions if p.kind == "mig"
        )
        for prof, n in sorted(profiles.items()):
            out[f"mig.{prof}.count"] = str(n)

    pfs = [g for g in gpus if not g.guest_vf]
    capable = any((g.sriov_totalvfs or 0) > 0 for g in pfs)
    out["sriov.capable"] = "true" if capable else "false"
    if capable:
        out["sriov.vfs"] = str(sum(g.sriov_numvfs or 0 for g in pfs))

    if snap.nvswitches and nv:
        out["interconnect.nvswitch"] = "true"
    if any("xgmi" in g.interconnects for g in amd):
        out["interconnect.xgmi"] = "true"
    if any("xe-link" in g.interconnects for g in gpus if g.vendor == "intel"):
        out["interconnect.xelink"] = "true"
    for key, get in (
        ("partition.compute", lambda g: g.amd.partition_compute),
        ("partition.memory", lambda g: g.amd.partition_memory),
    ):
        known = [v for v in map(get, amd) if v]
        if known:
            out[key] = known[0] if len(set(known)) == 1 else MIXED

    links = [g.link for g in gpus if g.link is not None]
    gens = [lk.current_gen for lk in links if lk.current_gen]
    widths = [lk.current_width for lk in links if lk.current_width]
    if gens:
        out["pcie.gen"] = str(min(gens))
    if widths:
        out["pcie.width"] = str(min(widths))
    if any(lk.degraded for lk in links):
        out["pcie.degraded"] = "true"

    if snap.machine:
        m = sanitize_value(snap.machine)
        if m:
            out["machine"] = m
    if snap.runtime is not None:
        out.update(runtime_attributes(snap.runtime))
    return out


def runtime_attributes(rt: Runtime) -> dict[str, str]:
    """The ``runtime.*`` and ``devices.ready`` values (only on nodes with GPUs)."""
    out: dict[str, str] = {}
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


def _driver_version(snap: Snapshot, vendor: str) -> str | None:
    for m in _VENDOR_MODULE.get(vendor, ()):
        v = snap.driver_versions.get(m)
        if v:
            return sanitize_value(v) or None
    return None


def neutral_labels(snap: Snapshot, namespace: str = NAMESPACE) -> dict[str, str]:
    return {f"{namespace}/{k}": v for k, v in neutral_attributes(snap).items()}


def documented(key: str) -> bool:
    """True when an unprefixed neutral key matches an entry of LABEL_TABLE."""
    return any(d.regex().match(key) for d in LABEL_TABLE)


def render_docs() -> str:
    """docs/labels.md, generated from LABEL_TABLE (checked by a test)."""
    lines = [
        "# Labels (neutral profile)",
        "",
        "<!-- Generated by `python -m nfd_gpu.labels.neutral`; do not edit. -->",
        "",
        f"Namespace: `{NAMESPACE}/` (written `G/` below). Labels are emitted only when",
        "the node has at least one GPU. Numbers are base-10 integers so node affinity",
        "`Gt`/`Lt` works. On nodes with several kinds of GPU, string summaries become",
        "`mixed` and numbers the minimum; the per-vendor and per-product counts say the rest.",
        "",
        *table_rows("G", LABEL_TABLE),
    ]
    lines += [
        "",
        "Values are sanitised: `[A-Za-z0-9._-]` are kept, each run of other characters",
        "becomes one `-`, values are cut to 63 characters with alphanumeric ends.",
        "",
    ]
    return "\n".join(lines)


PROFILE = LabelProfile(
    "neutral",
    lambda snap, opts, warnings: neutral_labels(snap, opts.namespace),
    LABEL_TABLE,
    "docs/labels.md",
    render_docs,
)
__all__ = ["LabelDoc", "table_rows"]  # re-exported


if __name__ == "__main__":
    print(render_docs(), end="")
