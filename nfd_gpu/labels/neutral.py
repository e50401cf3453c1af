"""The vendor-neutral label profile: the public contract, docs/labels.md.

The values are the node summary (:func:`nfd_gpu.summary.node_summary`, also published as
the ``gpu.node`` attribute feature); ``neutral_labels`` adds the namespace.
``LABEL_TABLE`` documents every key and generates docs/labels.md.
"""

from __future__ import annotations

import dataclasses

from nfd_gpu.families import vocabulary
from nfd_gpu.labels.profile import LabelDoc, Profile, in_table, table_rows
from nfd_gpu.model import Snapshot
from nfd_gpu.summary import node_summary

NAMESPACE = "gpu.feature.node.kubernetes.io"


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


def neutral_labels(snap: Snapshot, namespace: str = NAMESPACE) -> dict[str, str]:
    return {f"{namespace}/{k}": v for k, v in node_summary(snap).items()}


def documented(key: str) -> bool:
    """True when an unprefixed neutral key matches an entry of LABEL_TABLE."""
    return in_table(LABEL_TABLE, key)


def _filled(table: tuple[LabelDoc, ...]) -> tuple[LabelDoc, ...]:
    """``table`` with ``{families}`` replaced by the family vocabulary."""
    fams = "; ".join(" ".join(f"`{f}`" for f in v) for v in vocabulary().values() if v)
    return tuple(
        dataclasses.replace(d, description=d.description.replace("{families}", fams)) for d in table
    )


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
        *table_rows("G", _filled(LABEL_TABLE)),
    ]
    lines += [
        "",
        "Values are sanitised: `[A-Za-z0-9._-]` are kept, each run of other characters",
        "becomes one `-`, values are cut to 63 characters with alphanumeric ends.",
        "",
        "## Unknown GPUs",
        "",
        "A GPU in no model table (`nfd_gpu/data/<vendor>.tsv`) whose family cannot be",
        "derived either gets one warning per distinct set of ids, from `scan` and the agent:",
        "`unknown GPU (10de:2c18, subsystem 1043:8a2f, revision a1) at 0000:01:00.0: ...`.",
        "Everything else known about it is still labelled; only `family` is omitted (or",
        "`mixed` beside another vendor's GPUs). Please report such a GPU with the ids of the",
        "warning and the output of `nfd-gpu snapshot DIR`, so the table gains its row.",
        "`scan --format json` shows where each fact came from (`sources` of each GPU:",
        "`table`, `nvml`, `procfs`, `sysfs`, `kfd`, `pci.ids` for the host's pci.ids, `pci`",
        "when only the ids were known).",
        "",
    ]
    return "\n".join(lines)


PROFILE = Profile(
    "neutral",
    lambda snap, opts, warnings: neutral_labels(snap, opts.namespace),
    LABEL_TABLE,
    "docs/labels.md",
    render_docs,
    (NAMESPACE,),
)


if __name__ == "__main__":
    print(render_docs(), end="")
