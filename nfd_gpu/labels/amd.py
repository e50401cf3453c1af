"""The ``amd`` compatibility profile: the keys and value formats of AMD's
k8s-node-labeller (ROCm/k8s-device-plugin, ``reference/amd-intel.md`` §A2).

Per kind, counted over GPUs, or over partitions on a partitioned GPU (the
labeller lists ``amdgpu_xcp_*`` partitions as devices):

* one distinct value: ``amd.com/gpu.<kind>=<value>``;
* several: ``amd.com/gpu.<kind>.<value>=<count>`` for each (the labeller's
  multi-value form). The ``beta.amd.com`` copies are not emitted.

Differences from the labeller, on purpose: product names are sanitised (``/``
and other invalid characters become ``_``, parentheses are dropped:
ROCm/k8s-device-plugin#218, #104, #230); ``family`` is derived from the ISA
target (the labeller asks libdrm for the family id; the values agree for the
targets in :data:`GFX_FAMILY`); ``*-partitioning-supported`` is ``true`` only
when the ``available_*_partition`` file lists modes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from nfd_gpu.labels.neutral import LabelDoc, table_rows
from nfd_gpu.labels.validate import NAME_MAX, sanitize_value
from nfd_gpu.model import Gpu, Partition, Snapshot

PREFIX = "amd.com"

# libdrm family_id names (include/uapi/drm/amdgpu_drm.h) by ISA target.
GFX_FAMILY = {
    "gfx900": "AI",
    "gfx906": "AI",
    "gfx908": "AI",
    "gfx90a": "AI",
    "gfx940": "AI",
    "gfx941": "AI",
    "gfx942": "AI",
    "gfx950": "AI",
    "gfx902": "RV",
    "gfx1010": "NV",
    "gfx1011": "NV",
    "gfx1012": "NV",
    "gfx1030": "NV",
    "gfx1031": "NV",
    "gfx1032": "NV",
    "gfx1034": "NV",
    "gfx1100": "GC_11_0_0",
    "gfx1101": "GC_11_0_0",
    "gfx1102": "GC_11_0_0",
    "gfx1200": "GC_12_0_0",
    "gfx1201": "GC_12_0_0",
}

LABEL_TABLE: tuple[LabelDoc, ...] = (
    LabelDoc(
        "gpu.device-id",
        "4 lower-hex digits, e.g. `740f`",
        "PCI device id (of the VFs on a `vf-passthrough` host).",
    ),
    LabelDoc(
        "gpu.product-name",
        "e.g. `Instinct_MI210`",
        "amdgpu `product_name` (else the marketing name), spaces and `/` as `_`, "
        "parentheses dropped.",
    ),
    LabelDoc("gpu.vram", "`<GiB>G`, e.g. `64G`", "VRAM, MiB / 1024 rounded."),
    LabelDoc("gpu.simd-count", "integer", "KFD `simd_count`."),
    LabelDoc("gpu.cu-count", "integer", "KFD `simd_count / simd_per_cu`."),
    LabelDoc("gpu.family", "`AI` `RV` `NV` `GC_11_0_0` `GC_12_0_0`", "libdrm family name."),
    LabelDoc("gpu.driver-version", "e.g. `6.10.5`", "amdgpu module version."),
    LabelDoc(
        "gpu.compute-memory-partition",
        "`<compute>_<memory>`, e.g. `cpx_nps4`",
        "Only when every GPU has the same modes.",
    ),
    LabelDoc("gpu.compute-partitioning-supported", "`true` `false`", "First GPU."),
    LabelDoc("gpu.memory-partitioning-supported", "`true` `false`", "First GPU."),
    LabelDoc("gpu.mode", "`container` `vf-passthrough` `pf-passthrough`", "As the labeller's."),
    LabelDoc(
        "gpu.<kind>.<value>",
        "integer",
        "On nodes with several values of a kind: GPUs (or partitions) per value.",
    ),
)

_MODES = ("container", "vf-passthrough", "pf-passthrough")
_PRODUCT_DROP = re.compile(r"[()]")
_PRODUCT_UNDERSCORE = re.compile(r"[^A-Za-z0-9._-]+")


def product_name(raw: str) -> str:
    """``AMD Instinct MI250X / MI250`` -> ``AMD_Instinct_MI250X_MI250``."""
    s = _PRODUCT_UNDERSCORE.sub("_", _PRODUCT_DROP.sub("", raw.strip()))
    return sanitize_value(s.strip("_.-"))


def vram_label(mib: int) -> str:
    """The labeller's format: MiB / 1024 rounded half away from zero, ``G`` suffix."""
    return f"{(mib * 2 + 1024) // 2048}G"


def _units(gpu: Gpu, parts: list[Partition], vf_ids: list[str]) -> list[dict[str, str]]:
    """Per-device label values: one per partition on a partitioned GPU, one per VF
    on a ``vf-passthrough`` PF (the labeller's VF mode lists the VFs), else the GPU."""
    base: dict[str, str] = {"device-id": gpu.device_id}
    if gpu.mode == "vf-passthrough" and vf_ids:
        return [{"device-id": v} for v in vf_ids]
    if gpu.mode != "container":
        return [base]
    raw = gpu.board_product or gpu.product
    if raw:
        name = product_name(raw)
        if name:
            base["product-name"] = name
    family = GFX_FAMILY.get(gpu.gfx or "")
    if family:
        base["family"] = family
    if not parts:
        u = dict(base)
        if gpu.memory_mib:
            u["vram"] = vram_label(gpu.memory_mib)
        if gpu.simd_count:
            u["simd-count"] = str(gpu.simd_count)
        if gpu.compute_units:
            u["cu-count"] = str(gpu.compute_units)
        return [u]
    out = []
    for p in parts:
        u = dict(base)
        if p.memory_mib:
            u["vram"] = vram_label(p.memory_mib)
        if p.simd_count:
            u["simd-count"] = str(p.simd_count)
        if p.compute_units:
            u["cu-count"] = str(p.compute_units)
        out.append(u)
    return out


def _count_labels(kind: str, values: list[str]) -> dict[str, str]:
    counts = Counter(values)
    if len(counts) == 1:
        return {f"{PREFIX}/gpu.{kind}": values[0]}
    room = NAME_MAX - len(f"gpu.{kind}.")
    return {
        f"{PREFIX}/gpu.{kind}.{sanitize_value(v, room)}": str(n) for v, n in sorted(counts.items())
    }


def amd_labels(snap: Snapshot) -> dict[str, str]:
    gpus = [g for g in snap.gpus if g.vendor == "amd"]
    if not gpus:
        return {}
    units: list[dict[str, str]] = []
    device_of = {d.address: d.device for d in snap.pci}
    for g in gpus:
        vf_ids = [device_of[v] for v in g.vfs if v in device_of]
        units += _units(g, [p for p in snap.partitions if p.parent == g.address], vf_ids)
    out: dict[str, str] = {}
    for kind in ("device-id", "product-name", "vram", "simd-count", "cu-count", "family"):
        vals = [u[kind] for u in units if kind in u]
        if vals:
            out.update(_count_labels(kind, vals))

    container = [g for g in gpus if g.mode == "container"]
    version = snap.driver_versions.get("amdgpu")
    if container and version:
        out[f"{PREFIX}/gpu.driver-version"] = sanitize_value(version)

    combos = {(g.partition_compute, g.partition_memory) for g in container}
    if len(combos) == 1:
        ((c, m),) = combos
        if c and m:
            out[f"{PREFIX}/gpu.compute-memory-partition"] = f"{c}_{m}"
    if container:
        first = container[0]
        get: Callable[[Gpu], tuple[str, ...]]
        for kind, get in (
            ("compute", lambda g: g.compute_partitions_available),
            ("memory", lambda g: g.memory_partitions_available),
        ):
            out[f"{PREFIX}/gpu.{kind}-partitioning-supported"] = "true" if get(first) else "false"

    modes = {g.mode for g in gpus if g.mode in _MODES}
    if len(modes) == 1:
        out[f"{PREFIX}/gpu.mode"] = modes.pop() or ""
    return out


def documented(key: str) -> bool:
    """True when an ``amd.com/...`` key matches LABEL_TABLE."""
    name = key.removeprefix(f"{PREFIX}/")
    return any(d.regex().match(name) for d in LABEL_TABLE)


def render_docs() -> str:
    """docs/labels-amd.md, generated from LABEL_TABLE (checked by a test)."""
    lines = [
        "# Labels (amd compatibility profile)",
        "",
        "<!-- Generated by `python -m nfd_gpu.labels.amd`; do not edit. -->",
        "",
        "Selected with `nfd-gpu scan --profile amd`. Keys and formats of AMD's",
        "k8s-node-labeller (`amd.com/` below); values are counted over GPUs, or over",
        "partitions on partitioned GPUs. With one distinct value the plain key is set;",
        "with several, one `<kind>.<value>` count key per value. Differences: product",
        "names are sanitised (`/` -> `_`, parentheses dropped), `beta.amd.com` copies",
        "and firmware labels are not emitted.",
        "",
        *table_rows(PREFIX, LABEL_TABLE),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_docs(), end="")
