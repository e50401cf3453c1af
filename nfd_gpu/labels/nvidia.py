"""The ``nvidia`` compatibility profile: GPU Feature Discovery's keys and value formats.

Keys are under ``nvidia.com/``, as GFD v0.19.0 writes them: see docs/migration.md and
tests/data/nvidia/. :data:`LABEL_TABLE` documents them, rendered to docs/labels-nvidia.md.
As in GFD's ``internal/lm``, the labels are small labelers merged in order: :data:`LABELERS`.

- GPUs: by default those NVML enumerates, bound to ``nvidia``. As GFD, nothing is emitted
  when NVML does not answer: no driver, or a vfio-only host. GFD exits there with
  ``--fail-on-init-error``. Nothing either when one NVML GPU fails: a lost GPU fails GFD's pass.
- GFD's ``vfio`` strategy, by ``NvidiaOptions.discovery``: the GPUs bound to vfio-pci, see
  :mod:`.nvidia_vfio`. ``tegra``, and ``auto`` on a Jetson: the integrated GPU as CUDA
  answers, see :mod:`.nvidia_tegra`.
- Product on mixed nodes, as GFD's ``newGPULabelers``: GFD writes every model's labels, the
  MIG-enabled models first, the full-GPU models last. So a full GPU's model wins. Among
  several full-GPU models GFD's winner follows Go map order: its issues #27 and #731. So it
  does among MIG-enabled models on a node without full GPUs. nfd-gpu picks the most numerous
  model; on a tie, the first name in sorted order. ``gpu.count`` counts the GPUs of that
  model, MIG-enabled or not, as in GFD.
- MIG strategy, by ``--mig-strategy``, ``NFD_GPU_MIG_STRATEGY`` or ``flags.migStrategy`` of the
  sharing config. ``none`` is the default; it, ``single`` and ``mixed`` behave as GFD's. An
  invalid ``single`` gives ``gpu.product=<model>-MIG-INVALID``, count 0. ``auto``, nfd-gpu's
  own, derives it from the hardware: ``none`` when no GPU has MIG on; ``single`` when every
  GPU has MIG on and all MIG devices share one profile; else ``mixed``. MIG devices carry
  ``memory``, ``multiprocessors``, ``slices.gi/ci`` and ``engines.copy/decoder/encoder/jpeg/ofa``,
  from NVML's MIG device attributes.
- Sharing: ``--sharing-config`` is the device plugin's config file.
  :mod:`nfd_gpu.config.sharing` reads it into :class:`NvidiaOptions`. Labels:
  ``gpu.replicas``, ``gpu.sharing-strategy`` of ``time-slicing`` or ``mps``, ``mps.capable``.
  As the device plugin's ``api/config/v1/sharing.go``: the strategy is MPS when the ``mps``
  block has replicas. The replicas come from the ``mps`` block whenever there is one.
  ``-SHARED`` ends the product when replicas > 1, unless ``renameByDefault``. MPS with
  MIG-enabled GPUs is a warning and no label at all: GFD fails its pass.
- ``gpu.clique`` when every fabric-attached GPU reports the same cluster UUID and clique id.
- ``gfd.timestamp`` only with ``NvidiaOptions.timestamp``, set by ``--gfd-timestamp``: fixed
  once at start, as GFD does. Off by default: a value new at each restart rewrites the object.
- ``vgpu.present``, ``vgpu.host-driver-version``, ``vgpu.host-driver-branch``: from the
  vGPU-guest facts (:mod:`nfd_gpu.discovery.nvidia.vgpu`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from nfd_gpu.catalog.families import nvidia_family
from nfd_gpu.labels import nvidia_tegra, nvidia_vfio
from nfd_gpu.labels.nvidia_options import GFD_MIG_STRATEGIES as GFD_MIG_STRATEGIES  # re-exported
from nfd_gpu.labels.nvidia_options import MIG_STRATEGIES as MIG_STRATEGIES  # re-exported
from nfd_gpu.labels.nvidia_options import NvidiaOptions as NvidiaOptions  # re-exported
from nfd_gpu.labels.nvidia_vgpu import vgpu_labels
from nfd_gpu.labels.profile import Profile, in_table, table_rows
from nfd_gpu.model import Gpu, Partition, Snapshot
from nfd_gpu.names import LabelDoc
from nfd_gpu.record import Record, record

PREFIX = "nvidia.com"
_KEEP = re.compile(r"[^A-Za-z0-9_. -]")


def gfd_sanitise(s: str) -> str:
    """Sanitise as GFD's ``sanitise()``: keep ``[A-Za-z0-9-_. ]``, whitespace runs -> ``-``."""
    return "-".join(_KEEP.sub("", s).split())


def _family(major: int, minor: int) -> str:
    """GFD ``getArchFamily``: the shared derivation, ``undefined`` where it names none."""
    return nvidia_family(major, minor) or "undefined"


def _version_labels(prefix: str, version: str, rev: str = "") -> dict[str, str]:
    """Return ``<prefix>.major``, ``.minor`` and, if any, ``.<rev>`` of an ``X.Y[.Z]`` version."""
    parts = version.split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        return {}
    out = {f"{prefix}.major": parts[0], f"{prefix}.minor": parts[1]}
    if rev:
        out[f"{prefix}.{rev}"] = parts[2] if len(parts) == 3 else ""
    return out


GPU_RESOURCE = "nvidia.com/gpu"
# MIG device labels: (label, Partition field, what it is: NVML's MIG device attribute)
_MIG_ATTRS = (
    ("memory", "memory_mib", "memory in MiB (`memorySizeMB`)"),
    ("multiprocessors", "compute_units", "multiprocessors (`multiprocessorCount`)"),
    ("slices.gi", "slices_gi", "GPU instance slices (`gpuInstanceSliceCount`)"),
    ("slices.ci", "slices_ci", "compute instance slices (`computeInstanceSliceCount`)"),
    ("engines.copy", "engines_copy", "copy engines (`sharedCopyEngineCount`)"),
    ("engines.decoder", "engines_decoder", "video decoders (`sharedDecoderCount`)"),
    ("engines.encoder", "engines_encoder", "video encoders (`sharedEncoderCount`)"),
    ("engines.jpeg", "engines_jpeg", "JPEG decoders (`sharedJpegCount`)"),
    ("engines.ofa", "engines_ofa", "optical flow accelerators (`sharedOfaCount`)"),
)


def _zero_written(label: str) -> bool:
    """Slice and engine counts are written when 0; memory and multiprocessors are not."""
    return label.startswith(("engines", "slices"))


def strategy(gpus: list[Gpu], parts: list[Partition]) -> str:
    """The strategy ``auto`` picks: none without MIG, single when uniform, else mixed."""
    if not any(g.nvidia.mig_enabled for g in gpus):
        return "none"
    profiles = {p.profile for p in parts}
    if all(g.nvidia.mig_enabled for g in gpus) and len(profiles) == 1:
        return "single"
    return "mixed"


def single_is_valid(gpus: list[Gpu], parts: list[Partition]) -> str | None:
    """Return None when strategy ``single`` is valid here, else why not: GFD's four conditions."""
    with_parts = {p.parent for p in parts}
    if any(g.nvidia.mig_enabled and g.address not in with_parts for g in gpus):
        return "a MIG-enabled GPU has no MIG devices"
    if any(not g.nvidia.mig_enabled for g in gpus):
        return "MIG-enabled and MIG-disabled GPUs on one node"
    if len({p.profile for p in parts}) != 1:
        return "more than one MIG profile on the node"
    return None


def _sharing(opts: NvidiaOptions, resource: str) -> tuple[str, str, bool]:
    """Return replicas, sharing-strategy and shared of a resource under the sharing config."""
    n = opts.replicas.get(resource, 0)
    if n > 1:
        return str(n), opts.sharing, not opts.rename_by_default
    return "1", "none", False


def clique(gpus: list[Gpu], warnings: list[str] | None = None) -> str | None:
    """``gpu.clique``: one cluster UUID and clique id for every fabric-attached GPU, else None."""
    cliques = {g.nvidia.clique for g in gpus if g.nvidia.clique}
    if len(cliques) == 1:
        return cliques.pop()
    if len(cliques) > 1 and warnings is not None:
        warnings.append(f"nvidia: GPUs in several fabric cliques {sorted(cliques)}: no gpu.clique")
    return None


def gfd_gpus(snap: Snapshot, warnings: list[str] | None = None) -> list[Gpu]:
    """Return the GPUs GFD labels: those bound to the ``nvidia`` driver, less a DGX Display.

    - The skipped names are :data:`GFD_SKIPPED_NAMES`.
    - Empty when NVML answered for some GPUs and failed for another; when NVML lists none of
      them, RmInitAdapter failed; or when ``nvmlInit`` failed with the library present.
    - Why: GFD only sees GPUs through NVML, by ``--device-discovery-strategy auto``. Without
      the driver it exits: ``--fail-on-init-error`` defaults to true. An NVML error on one
      GPU, a lost one say, fails its labelling pass. Either way it writes no ``nvidia.com``
      label. GPUs bound to another driver, such as ``vfio-pci``, are invisible to NVML.
    - When nfd-gpu itself has no NVML, no recorded answers and no library, the driver-bound
      GPUs are labelled from procfs and PCI.
    """
    gpus = [g for g in snap.gpus if g.vendor == "nvidia"]
    init_error = nvml_init_error(snap)
    if init_error is not None:
        if warnings is not None:
            warnings.append(f"nvidia: nvmlInit failed ({init_error}): no GPU labels (as GFD)")
        return []
    bound = [g for g in gpus if g.driver == "nvidia" and not _skipped(g)]
    nvml = any(g.nvidia.nvml_answered for g in bound)
    failed = [g for g in bound if not g.nvidia.nvml_answered and (nvml or _not_answering(g))]
    if gpus and (failed or not bound) and warnings is not None:
        why = f"NVML failed for {failed[0].address}" if failed else "no GPU on the nvidia driver"
        warnings.append(f"nvidia: {why}: no nvidia.com labels (GFD writes none either)")
    return [] if failed else bound


def _not_answering(g: Gpu) -> bool:
    """Tell whether NVML was up and did not list this GPU: RmInitAdapter failed.

    NVML says "No devices were found". GFD sees no device: an NVML error, not a node without NVML.
    """
    return any(r.reason == "not-answering" and r.source == "nvml" for r in g.health.reasons)


def nvml_init_error(snap: Snapshot) -> str | None:
    """Return why ``nvmlInit`` failed on this node although the NVML library is there, or None."""
    return next((g.nvidia.nvml_init_error for g in snap.gpus if g.nvidia.nvml_init_error), None)


# NVML names go-nvlib's device library skips (pkg/nvlib/device/api.go:63, the default of
# device.New that GFD uses): GFD neither counts nor labels a DGX Station's display GPU
GFD_SKIPPED_NAMES = ("DGX Display", "NVIDIA DGX Display")


def _skipped(g: Gpu) -> bool:
    return bool(g.nvidia.nvml_answered) and g.product in GFD_SKIPPED_NAMES


def product_model(gpus: list[Gpu]) -> str:
    """Return the model ``gpu.*`` describes.

    A full-GPU model wins when there is one: GFD writes those last. Among them the most
    numerous wins; on a tie, the first in sorted order.
    """
    full = [g for g in gpus if not g.nvidia.mig_enabled] or gpus
    names = Counter(gfd_sanitise(g.product or "") for g in full)
    return sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


@record(slots=False)
class _LabelerInputs(Record):
    """What the labelers of one labelling pass share."""

    snap: Snapshot
    opts: NvidiaOptions
    gpus: list[Gpu]  # the GPUs GFD labels (gfd_gpus)
    model: str  # the model gpu.* describes (product_model)
    parts: list[Partition]  # the MIG devices of those GPUs
    strategy: str  # the MIG strategy, auto resolved
    bar_memory: dict[str, int] | None = None  # vfio strategy: BAR memory (bytes) by address
    tegra: bool = False  # tegra strategy: the GPUs are CUDA's (nvidia_tegra)


class _Refused(Exception):
    """A labeler fails GFD's whole labelling pass: no ``nvidia.com`` label, a warning."""


def _timestamp(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    return {} if p.opts.timestamp is None else {"gfd.timestamp": str(p.opts.timestamp)}


def _vgpu(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    pci = [g for g in p.snap.gpus if g.vendor == "nvidia" and not g.integrated]
    vgpu = (nvidia_tegra.vgpu_labels(pci) if p.tegra else None) or vgpu_labels(pci)
    if vgpu is None:
        raise _Refused(
            "a vGPU capability without its host driver record: no nvidia.com labels "
            "(GFD's labelling fails)"
        )
    return vgpu


def _versions(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    """Return ``cuda.driver*``, the driver version, and ``cuda.runtime*``, the CUDA driver API."""
    if p.bar_memory is not None:
        return nvidia_vfio.version_labels()
    if p.tegra:
        return nvidia_tegra.version_labels(p.snap.driver_versions.get("cuda", ""))
    driver = p.snap.driver_versions.get("nvidia", "")
    out = _version_labels("cuda.driver", driver, "rev")
    out.update(_version_labels("cuda.driver-version", driver, "revision"))
    if driver and "cuda.driver-version.major" in out:
        out["cuda.driver-version.full"] = driver
    cuda = p.snap.driver_versions.get("cuda", "")
    out.update(_version_labels("cuda.runtime", cuda))
    out.update(_version_labels("cuda.runtime-version", cuda))
    if "cuda.runtime-version.major" in out:
        out["cuda.runtime-version.full"] = cuda
    return out


def _machine(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    return {"gpu.machine": gfd_sanitise(p.snap.machine or "") or "unknown"}


def _gpu(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    """``gpu.*`` of the model: count, sharing, product, memory, architecture."""
    mine = [g for g in p.gpus if gfd_sanitise(g.product or "") == p.model]
    full = [g for g in mine if not g.nvidia.mig_enabled]
    dev = (full or mine)[-1]  # GFD keeps the last device of each name
    replicas, sharing, shared = _sharing(p.opts, GPU_RESOURCE) if full else ("0", "none", False)
    out = {
        "gpu.count": str(len(mine)),
        "gpu.replicas": replicas,
        "gpu.sharing-strategy": sharing,
        "gpu.product": p.model + ("-SHARED" if shared else ""),
    }
    memory = dev.memory_mib if p.bar_memory is None else p.bar_memory[dev.address]
    if memory:
        out["gpu.memory"] = str(memory)
    if dev.nvidia.compute_major:
        out["gpu.family"] = _family(dev.nvidia.compute_major, dev.nvidia.compute_minor or 0)
        out["gpu.compute.major"] = str(dev.nvidia.compute_major)
        out["gpu.compute.minor"] = str(dev.nvidia.compute_minor or 0)
    return out


def _mode(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    classes = {g.class_id[:6] for g in p.gpus}
    return {
        "gpu.mode": {"030000": "graphics", "030200": "compute"}.get(
            classes.pop() if len(classes) == 1 else "", "unknown"
        )
    }


def _mig_capable(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    return {"mig.capable": "true" if any(g.nvidia.mig_capable for g in p.gpus) else "false"}


def _mps(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    mps = p.opts.sharing == "mps" and any(n > 1 for n in p.opts.replicas.values())
    if mps and any(g.nvidia.mig_enabled for g in p.gpus):
        # GFD isMPSCapable fails its whole labelling pass: no nvidia.com label at all
        raise _Refused("MPS sharing is not supported for MIG devices: no nvidia.com labels")
    return {"mps.capable": "true" if mps else "false"}


def _clique(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    cl = clique(p.gpus, warnings)
    return {"gpu.clique": cl} if cl else {}


def _mig_strategy(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    return {} if p.strategy == "none" else {"mig.strategy": p.strategy}


def _mig_devices(p: _LabelerInputs, warnings: list[str]) -> dict[str, str]:
    """Return the labels of the MIG devices.

    - Strategy single: ``gpu.*`` of the MIG devices; ``-MIG-INVALID`` if the node forbids it.
    - Strategy mixed: ``mig-<profile>.*`` per MIG profile.
    """
    if p.strategy == "none":
        return {}
    if p.strategy == "single":
        if not any(g.nvidia.mig_enabled for g in p.gpus):
            return {}  # single without MIG: as none
        why = single_is_valid(p.gpus, p.parts)
        if why is not None:
            warnings.append(f"nvidia: invalid MIG strategy single: {why}")
            first_mig = next(g for g in p.gpus if g.nvidia.mig_enabled)  # GFD: migEnabledDevices[0]
            return {
                "gpu.product": f"{gfd_sanitise(first_mig.product or '')}-MIG-INVALID",
                "gpu.count": "0",
                "gpu.replicas": "0",
                "gpu.sharing-strategy": "",
                "gpu.memory": "0",
            }
    by_profile: dict[str, list[Partition]] = {}
    for part in p.parts:
        by_profile.setdefault(part.profile.replace("+", "."), []).append(part)
    model = {g.address: gfd_sanitise(g.product or "") for g in p.gpus}
    out: dict[str, str] = {}
    for prof, ps in sorted(by_profile.items()):
        base = "gpu" if p.strategy == "single" else f"mig-{prof}"
        resource = GPU_RESOURCE if p.strategy == "single" else f"{PREFIX}/mig-{prof}"
        replicas, sharing, shared = _sharing(p.opts, resource)
        product = f"{model[ps[0].parent]}-MIG-{prof}" + ("-SHARED" if shared else "")
        out[f"{base}.product"] = product
        out[f"{base}.count"] = str(len(ps))
        out[f"{base}.replicas"] = replicas
        out[f"{base}.sharing-strategy"] = sharing
        for label, attr, _ in _MIG_ATTRS:
            value = getattr(ps[0], attr)
            if value is not None and (value or _zero_written(label)):
                out[f"{base}.{label}"] = str(value)
    return out


# GFD's labelers (internal/lm), merged in this order: a later key wins.
LABELERS: tuple[Callable[[_LabelerInputs, list[str]], dict[str, str]], ...] = (
    _timestamp,
    _vgpu,
    _versions,
    _machine,
    _gpu,
    _mode,
    _mig_capable,
    _mps,
    _clique,
    _mig_strategy,
    _mig_devices,
)


def nvidia_labels(
    snap: Snapshot, opts: NvidiaOptions | None = None, warnings: list[str] | None = None
) -> dict[str, str]:
    """Return GFD's labels of the node: :data:`LABELERS` merged in order.

    Empty where GFD writes none, with the reason in ``warnings``."""
    opts = opts or NvidiaOptions()
    warnings = [] if warnings is None else warnings
    bars = None
    tegra = opts.discovery == "tegra" or (
        opts.discovery == "auto" and nvidia_tegra.is_tegra_host(snap)
    )
    if tegra:
        gpus = nvidia_tegra.cuda_gpus(snap)
    elif opts.discovery == "vfio":
        try:
            gpus, bars = nvidia_vfio.vfio_gpus(snap)
        except nvidia_vfio.VfioRefused as exc:
            warnings.append(f"nvidia: vfio strategy: {exc}: no labels (GFD fails)")
            return {}
    else:
        gpus = gfd_gpus(snap, warnings)
    labelers = LABELERS
    if not gpus:
        if tegra and opts.fail_on_init_error:
            warnings.append("nvidia: tegra strategy: CUDA does not answer: no labels (GFD fails)")
            return {}
        if (
            not tegra
            and bars is None
            and (opts.fail_on_init_error or nvml_init_error(snap) is None)
        ):
            return {}
        # GFD with failOnInitError false (its null resource manager), or vfio without a
        # vfio-pci GPU: only the labelers that need no device (internal/lm/nvml.go:49)
        labelers = (_timestamp, _vgpu)
    addrs = {g.address for g in gpus}
    parts = [p for p in snap.partitions if p.kind == "mig" and p.parent in addrs]
    strat = opts.mig_strategy if opts.mig_strategy != "auto" else strategy(gpus, parts)
    model = product_model(gpus) if gpus else ""
    labelling = _LabelerInputs(snap, opts, gpus, model, parts, strat, bars, tegra)
    out: dict[str, str] = {}
    try:
        for labeler in labelers:
            out.update(labeler(labelling, warnings))
    except _Refused as exc:
        warnings.append(f"nvidia: {exc}")
        return {}
    return {f"{PREFIX}/{k}": v for k, v in out.items()}


def _omitted(label: str) -> str:
    return "" if _zero_written(label) else " Omitted when 0 or unknown."


LABEL_TABLE: tuple[LabelDoc, ...] = (
    LabelDoc(
        "gfd.timestamp",
        "Unix seconds",
        "Opt-in (`--gfd-timestamp`): the scan's start; the agent's start, the same every "
        "pass (as GFD).",
    ),
    LabelDoc(
        "vgpu.present",
        "`true` `false`",
        "An NVIDIA PCI function carries the vGPU vendor capability (id 0x09, signature `VF`). "
        "Only where the whole config space of every NVIDIA PCI function was read (root); "
        "else only `true`, from NVML virtualization mode `VGPU`.",
    ),
    LabelDoc(
        "vgpu.host-driver-version",
        "e.g. `550.54.16`",
        "The hypervisor's vGPU manager, from the capability's host-driver record.",
    ),
    LabelDoc("vgpu.host-driver-branch", "e.g. `r550_40`", "Its branch, from the same record."),
    LabelDoc("cuda.driver-version.major", "integer", "Driver version, first part (`550`)."),
    LabelDoc("cuda.driver-version.minor", "digits", "Second part, as written (`54`, `06`)."),
    LabelDoc("cuda.driver-version.revision", "digits or empty", "Third part; empty for `X.Y`."),
    LabelDoc(
        "cuda.driver-version.full", "e.g. `550.54.15`", "The driver version (vfio: `unknown`)."
    ),
    LabelDoc("cuda.driver.major", "integer", "As `cuda.driver-version.major` (GFD's old key)."),
    LabelDoc("cuda.driver.minor", "digits", "As `cuda.driver-version.minor`."),
    LabelDoc("cuda.driver.rev", "digits or empty", "As `cuda.driver-version.revision`."),
    LabelDoc(
        "cuda.runtime-version.major",
        "integer",
        "CUDA driver API version major (NVML; without NVML from the driver branch, "
        "docs/nvidia.md).",
    ),
    LabelDoc("cuda.runtime-version.minor", "integer", "CUDA driver API version minor."),
    LabelDoc("cuda.runtime-version.full", "e.g. `12.4`", "CUDA driver API version (vfio: `0.0`)."),
    LabelDoc("cuda.runtime.major", "integer", "As `cuda.runtime-version.major` (old key)."),
    LabelDoc("cuda.runtime.minor", "integer", "As `cuda.runtime-version.minor` (old key)."),
    LabelDoc(
        "gpu.machine",
        "sanitised DMI product name or `unknown`",
        "`sys/class/dmi/id/product_name`, characters outside `[A-Za-z0-9-_. ]` dropped, "
        "spaces as `-`.",
    ),
    LabelDoc(
        "gpu.product",
        "sanitised NVML name, e.g. `NVIDIA-A100-SXM4-40GB`",
        "The model `gpu.*` describes: a full GPU's model before a MIG-enabled one, the most "
        "numerous, on a tie the first in sorted order. `-SHARED` appended when the sharing "
        "config replicates it (unless `renameByDefault`). Strategy single: "
        "`<model>-MIG-<profile>`, or `<model>-MIG-INVALID` when the node does not allow it. "
        "Strategy vfio: the pci.ids name (`GA100-A100-PCIe-80GB`).",
    ),
    LabelDoc(
        "gpu.count",
        "integer",
        "GPUs of that model, MIG-enabled or not. Strategy single: MIG devices; invalid: `0`.",
    ),
    LabelDoc(
        "gpu.replicas",
        "integer",
        "Replicas of `nvidia.com/gpu` in the sharing config, `1` without one; `0` when every "
        "GPU of the model has MIG on, and for an invalid strategy single.",
    ),
    LabelDoc(
        "gpu.sharing-strategy",
        "`none` `time-slicing` `mps` or empty",
        "`none` unless replicas > 1; empty for an invalid strategy single.",
    ),
    LabelDoc(
        "gpu.memory",
        "integer (MiB)",
        "Memory of the model's last GPU; strategy single: of the MIG devices; `0` for "
        "an invalid strategy single; vfio: the 64-bit BARs rounded up to a power of two, in "
        "bytes (as GFD). Omitted when 0 or unknown.",
    ),
    LabelDoc(
        "gpu.family",
        "`tesla` `fermi` `kepler` `maxwell` `pascal` `volta` `turing` `ampere` "
        "`ada-lovelace` `hopper` `blackwell` `rubin` `undefined`",
        "Architecture from the compute capability; omitted without it.",
    ),
    LabelDoc("gpu.compute.major", "integer", "Compute capability major (vfio: none, GFD's -1)."),
    LabelDoc("gpu.compute.minor", "integer", "Compute capability minor."),
    LabelDoc(
        "gpu.mode",
        "`compute` `graphics` `unknown`",
        "PCI class of the GPUs (`0302`, `0300`); `unknown` when they differ or for another class.",
    ),
    LabelDoc("mig.capable", "`true` `false`", "Any GPU supports MIG."),
    LabelDoc(
        "mps.capable",
        "`true` `false`",
        "The sharing config shares GPUs through MPS (replicas > 1). MPS on a node with MIG "
        "enabled: no `nvidia.com/` label at all, and a warning.",
    ),
    LabelDoc(
        "gpu.clique",
        "`<cluster UUID>.<clique id>`",
        "NVLink fabric clique, when every fabric-attached GPU reports the same one (NVML).",
    ),
    LabelDoc(
        "mig.strategy",
        "`single` `mixed`",
        "The MIG strategy (`--mig-strategy`, `flags.migStrategy`; `auto` resolved); "
        "absent for `none`.",
    ),
    *(
        LabelDoc(f"gpu.{label}", "integer", f"Strategy single: the MIG devices' {what}.")
        for label, _, what in _MIG_ATTRS
        if label != "memory"
    ),
    LabelDoc(
        "mig-<profile>.product",
        "`<model>-MIG-<profile>`, `-SHARED` appended when replicated",
        "Strategy mixed: one set of `mig-<profile>.*` keys per MIG profile (`+` written "
        "`.`: `mig-1g.5gb.me`).",
    ),
    LabelDoc("mig-<profile>.count", "integer", "MIG devices of that profile."),
    LabelDoc(
        "mig-<profile>.replicas",
        "integer",
        "Replicas of `nvidia.com/mig-<profile>` in the sharing config, `1` without.",
    ),
    LabelDoc(
        "mig-<profile>.sharing-strategy",
        "`none` `time-slicing` `mps`",
        "`none` unless replicas > 1.",
    ),
    *(
        LabelDoc(f"mig-<profile>.{label}", "integer", f"The MIG devices' {what}.{_omitted(label)}")
        for label, _, what in _MIG_ATTRS
    ),
)


def documented(key: str) -> bool:
    """True when an ``nvidia.com/...`` key matches LABEL_TABLE."""
    return key.startswith(f"{PREFIX}/") and in_table(LABEL_TABLE, key.removeprefix(f"{PREFIX}/"))


def render_docs() -> str:
    """Render docs/labels-nvidia.md from LABEL_TABLE; a test checks it."""
    lines = [
        "# Labels (nvidia compatibility profile)",
        "",
        "<!-- Generated by `python -m nfd_gpu.labels.nvidia`; do not edit. -->",
        "",
        "Selected with `nfd-gpu scan --profile nvidia`. Keys and formats of NVIDIA GPU",
        "Feature Discovery v0.19.0 (`nvidia.com/` below), for the GPUs NVML sees (bound to",
        "the `nvidia` driver; with GFD's `deviceDiscoveryStrategy: vfio`, those bound to",
        "`vfio-pci`, from PCI). As with GFD, a node where NVML does not answer, or fails for",
        "one GPU, gets no `nvidia.com/` label. `--mig-strategy` (`none`, the default,",
        "`single`, `mixed`, or nfd-gpu's `auto`) and `--sharing-config` (the device",
        "plugin's config file) choose the MIG and sharing keys; docs/nvidia.md has the rules.",
        "`<profile>` is a MIG profile name (`1g.5gb`, `1c.3g.20gb`, `1g.10gb.me`).",
        "",
        *table_rows(PREFIX, LABEL_TABLE),
        "",
    ]
    return "\n".join(lines)


PROFILE = Profile(
    "nvidia",
    lambda snap, opts, warnings: nvidia_labels(snap, opts.nvidia, warnings),
    LABEL_TABLE,
    "docs/labels-nvidia.md",
    render_docs,
    (PREFIX,),
)


if __name__ == "__main__":
    print(render_docs(), end="")
