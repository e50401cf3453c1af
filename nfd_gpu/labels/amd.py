"""The ``amd`` compatibility profile: the keys and value formats of AMD's k8s-node-labeller.

The labeller is ROCm/k8s-device-plugin's ``cmd/k8s-node-labeller``. See docs/labels-amd.md.

Defaults and options:

- Defaults are the labeller's with its sample DaemonSet flags:
  ``-vram -cu-count -simd-count -device-id -family -product-name``.
- Its other flags are profile options; see :mod:`nfd_gpu.labels.options`.
  They are ``amd-beta``, ``amd-driver-version``, ``amd-driver-src-version``,
  ``amd-compute-memory-partition``, ``amd-compute-partitioning-supported``,
  ``amd-memory-partitioning-supported`` and ``amd-mode``.
- ``amd-mode`` is the GPU operator's KubeVirt labeller's ``gpu.mode``.
- ``amd-no-<kind>`` drops a default kind. The Helm chart's flags leave out ``-product-name``.

Per kind, counted over the labeller's devices.
Those are each GPU, and each partition of a partitioned GPU.
The labeller lists the ``amdgpu_xcp_*`` partitions as devices.

* One distinct value: ``amd.com/gpu.<kind>=<value>``.
* Several: ``amd.com/gpu.<kind>.<value>=<count>`` for each.
* ``amd-beta``: ``beta.amd.com/gpu.<kind>.<value>=<count>`` always, and
  ``beta.amd.com/gpu.<kind>=<value>`` with one distinct value.

Values as the labeller writes them:

- Product names have spaces as ``_`` and parentheses dropped, nothing else.
  A name that is still no valid label value is dropped with a warning.
  Example: ``AMD_Instinct_MI250X_/_MI250``. The labeller's node update fails then.
- ``vram`` is ``round(MiB / 1024)G``.
  It is ``0G`` for a GPU whose KFD node reports no memory: a VF guest.
- ``driver-version`` is the amdgpu module version, empty for an in-tree driver.
- ``driver-src-version`` is its ``srcversion``: ``sys/module/amdgpu/srcversion``.
- ``*-partitioning-supported`` is whether the first GPU has the ``available_*_partition`` file.
- ``family`` is derived from the ISA target. The labeller asks libdrm for the family id.
  The values agree for the targets in :data:`GFX_FAMILY`.
"""

from __future__ import annotations

from collections import Counter

from nfd_gpu.labels.options import AMD_KINDS, selected
from nfd_gpu.labels.profile import Profile, in_table, table_rows
from nfd_gpu.model import Gpu, Partition, Snapshot
from nfd_gpu.names import LabelDoc

PREFIX = "amd.com"
BETA = "beta.amd.com"

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
        "amdgpu `product_name` (else the marketing name), spaces as `_`, "
        "parentheses dropped (a name still invalid is dropped with a warning).",
    ),
    LabelDoc(
        "gpu.vram",
        "`<GiB>G`, e.g. `64G`",
        "KFD `mem_banks/0` size, MiB / 1024 rounded; `0G` on a VF guest.",
    ),
    LabelDoc("gpu.simd-count", "integer", "KFD `simd_count`."),
    LabelDoc("gpu.cu-count", "integer", "KFD `simd_count / simd_per_cu`."),
    LabelDoc("gpu.family", "`AI` `RV` `NV` `GC_11_0_0` `GC_12_0_0`", "libdrm family name."),
    LabelDoc(
        "gpu.driver-version",
        "e.g. `6.10.5`",
        "Option `amd-driver-version`: amdgpu module version, empty for an in-tree driver.",
    ),
    LabelDoc(
        "gpu.driver-src-version",
        "e.g. `C502C9F63988A81945CAABD`",
        "Option `amd-driver-src-version`: amdgpu module `srcversion`, empty when the "
        "module has none.",
    ),
    LabelDoc(
        "gpu.compute-memory-partition",
        "`<compute>_<memory>`, e.g. `cpx_nps4`",
        "Option `amd-compute-memory-partition`: when every GPU has the same modes.",
    ),
    LabelDoc(
        "gpu.compute-partitioning-supported",
        "`true` `false`",
        "Option `amd-compute-partitioning-supported`: the first GPU has "
        "`available_compute_partition`.",
    ),
    LabelDoc(
        "gpu.memory-partitioning-supported",
        "`true` `false`",
        "Option `amd-memory-partitioning-supported`: the first GPU has "
        "`available_memory_partition`.",
    ),
    LabelDoc(
        "gpu.mode",
        "`container` `vf-passthrough` `pf-passthrough`",
        "Option `amd-mode`, as the GPU operator's KubeVirt labeller.",
    ),
    LabelDoc(
        "gpu.<kind>.<value>",
        "integer",
        "On nodes with several values of a kind: GPUs (or partitions) per value.",
    ),
)

_MODES = ("container", "vf-passthrough", "pf-passthrough")
_PRODUCT = str.maketrans({" ": "_", "(": None, ")": None})
KINDS = AMD_KINDS


def product_name(raw: str) -> str:
    """Write a product name as the labeller: trimmed, spaces to ``_``, parentheses dropped."""
    return raw.strip().translate(_PRODUCT)


def vram_label(mib: int) -> str:
    """Write memory as the labeller: MiB / 1024 rounded half away from zero, ``G`` suffix."""
    return f"{(mib * 2 + 1024) // 2048}G"


def _units(gpu: Gpu, parts: list[Partition], vf_ids: list[str]) -> list[dict[str, str]]:
    """Return per-device label values, as the labeller reads them.

    - Its devices are the PCI GPUs plus, on a partitioned GPU, the ``amdgpu_xcp_*`` platform
      devices of partitions 1..n-1.
    - ``vram``, ``simd-count`` and ``cu-count`` come from the KFD node of each device's
      render node. So they count partitions.
    - ``device-id``, ``product-name`` and ``family`` read
      ``/sys/class/drm/card<N>/device/{device,vendor,product_name}``.
      A platform device lacks those, so they count GPUs.
    - On a ``vf-passthrough`` PF, the labeller's VF mode, there is one ``device-id`` per VF.
    """
    base: dict[str, str] = {"device-id": gpu.device_id}
    if gpu.mode == "vf-passthrough" and vf_ids:
        return [{"device-id": v} for v in vf_ids]
    if gpu.mode != "container":
        return [base]
    raw = gpu.amd.board_product or gpu.product
    if raw:
        name = product_name(raw)
        if name:
            base["product-name"] = name
    family = GFX_FAMILY.get(gpu.amd.gfx or "")
    if family:
        base["family"] = family
    sources: list[Gpu | Partition] = list(parts)
    if not sources:
        sources.append(gpu)
    out = []
    for i, src in enumerate(sources):
        u = dict(base) if i == 0 else {}
        # KFD mem_banks/0 only, as the labeller (not mem_info_vram_total)
        mib = src.memory_mib if parts else gpu.amd.kfd_vram_mib
        if mib is not None:
            u["vram"] = vram_label(mib)
        simd = src.simd_count if isinstance(src, Partition) else src.amd.simd_count
        if simd:
            u["simd-count"] = str(simd)
        if src.compute_units:
            u["cu-count"] = str(src.compute_units)
        out.append(u)
    return out


def _count_labels(kind: str, values: list[str], beta: bool) -> dict[str, str]:
    """Run the labeller's ``createLabels``: plain key for one value, else per-value counts."""
    counts = Counter(values)
    out: dict[str, str] = {}
    if beta:
        out.update({f"{BETA}/gpu.{kind}.{v}": str(n) for v, n in sorted(counts.items())})
        if len(counts) == 1:
            out[f"{BETA}/gpu.{kind}"] = values[0]
    if len(counts) == 1:
        out[f"{PREFIX}/gpu.{kind}"] = values[0]
    else:
        out.update({f"{PREFIX}/gpu.{kind}.{v}": str(n) for v, n in sorted(counts.items())})
    return out


def amd_labels(snap: Snapshot, options: frozenset[str] = frozenset()) -> dict[str, str]:
    """Return the labeller's labels.

    ``options`` are :data:`PROFILE_OPTIONS` names without the ``amd-`` prefix:
    ``beta``, ``driver-version``, ...
    """
    gpus = [g for g in snap.gpus if g.vendor == "amd"]
    if not gpus or ("require-amdgpu" in options and all(g.driver != "amdgpu" for g in gpus)):
        return {}
    units: list[dict[str, str]] = []
    device_of = {d.address: d.device for d in snap.pci}
    for g in gpus:
        vf_ids = [device_of[v] for v in g.vfs if v in device_of]
        units += _units(g, [p for p in snap.partitions if p.parent == g.address], vf_ids)
    out: dict[str, str] = {}
    for kind in (k for k in KINDS if f"no-{k}" not in options):
        vals = [u[kind] for u in units if kind in u]
        if vals:
            out.update(_count_labels(kind, vals, "beta" in options))

    container = [g for g in gpus if g.mode == "container"]
    if container and "driver-version" in options:
        out[f"{PREFIX}/gpu.driver-version"] = snap.driver_versions.get("amdgpu", "")
    if container and "driver-src-version" in options:
        out[f"{PREFIX}/gpu.driver-src-version"] = snap.driver_src_versions.get("amdgpu", "")

    if container and "compute-memory-partition" in options:
        # one combination over the devices that have both modes (partitions carry their
        # GPU's); devices missing either are skipped, as UniquePartitionConfigCount does
        combos = {
            f"{g.amd.partition_compute}_{g.amd.partition_memory}"
            for g in container
            if g.amd.partition_compute and g.amd.partition_memory
        }
        if len(combos) == 1:
            out[f"{PREFIX}/gpu.compute-memory-partition"] = combos.pop()
    if container:
        first = min(container, key=lambda g: g.address)
        supported = {
            "compute": first.amd.compute_partitioning_supported,
            "memory": first.amd.memory_partitioning_supported,
        }
        for kind, has in supported.items():
            if f"{kind}-partitioning-supported" in options:
                out[f"{PREFIX}/gpu.{kind}-partitioning-supported"] = "true" if has else "false"

    modes = {g.mode for g in gpus if g.mode in _MODES}
    if len(modes) == 1 and "mode" in options:
        out[f"{PREFIX}/gpu.mode"] = modes.pop() or ""
    return out


def documented(key: str) -> bool:
    """True when an ``amd.com/...`` key matches LABEL_TABLE."""
    name = key.removeprefix(f"{PREFIX}/")
    return in_table(LABEL_TABLE, name)


def render_docs() -> str:
    """Render docs/labels-amd.md from LABEL_TABLE; a test checks it."""
    lines = [
        "# Labels (amd compatibility profile)",
        "",
        "<!-- Generated by `python -m nfd_gpu.labels.amd`; do not edit. -->",
        "",
        "Selected with `nfd-gpu scan --profile amd`. Keys and formats of AMD's",
        "k8s-node-labeller (`amd.com/` below) with its sample DaemonSet flags",
        "(`-vram -cu-count -simd-count -device-id -family -product-name`); the other",
        "flags are profile options (`--profile-option amd-driver-version`, ...,",
        "docs/configuration.md). Values are counted over GPUs, or over partitions on",
        "partitioned GPUs. With one distinct value the plain key is set; with several,",
        "one `<kind>.<value>` count key per value. Option `amd-beta` adds the",
        "labeller's `beta.amd.com/gpu.<kind>.<value>=<count>` keys (and",
        "`beta.amd.com/gpu.<kind>` with one value). Option `amd-no-<kind>` drops one",
        "default kind (and its `beta.amd.com` and count keys), as the labeller without",
        "that flag: `amd-no-product-name` gives its Helm chart's flags. Not emitted:",
        "`beta.amd.com/gpu.firmware.*` (libdrm queries).",
        "",
        *table_rows(PREFIX, LABEL_TABLE),
        "",
    ]
    return "\n".join(lines)


PROFILE = Profile(
    "amd",
    lambda snap, opts, warnings: amd_labels(snap, selected("amd", opts.profile_options)),
    LABEL_TABLE,
    "docs/labels-amd.md",
    render_docs,
    (PREFIX, BETA),
)


if __name__ == "__main__":
    print(render_docs(), end="")
