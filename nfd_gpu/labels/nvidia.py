"""The ``nvidia`` compatibility profile: GPU Feature Discovery's keys and value formats.

Keys under ``nvidia.com/`` as GFD v0.20.0 writes them (shared/reference/nvidia.md §1).

GPUs: those NVML enumerates (bound to ``nvidia``, answered by NVML). As GFD, nothing is
emitted when NVML does not answer (no driver, a vfio-only host: GFD exits with
``--fail-on-init-error``) or when one NVML GPU fails (a lost GPU fails GFD's pass).

Product on mixed nodes (GFD ``newGPULabelers``): GFD writes the labels of every model, the
MIG-enabled models first and the full-GPU models last, so a full GPU's model wins over a
MIG-enabled one. Among several full-GPU models (or several MIG-enabled models on a node
without full GPUs) GFD's winner follows Go map order (its issues #27 / #731); nfd-gpu picks
the most numerous model, on a tie the first name in sorted order. ``gpu.count`` counts the
GPUs of that model, MIG-enabled or not, as in GFD.

MIG strategy: ``none`` (default, as GFD), ``single`` or ``mixed`` (``--mig-strategy``,
``NFD_GPU_MIG_STRATEGY`` or ``flags.migStrategy`` of the sharing config) behave as GFD's: an
invalid ``single`` gives ``gpu.product=<model>-MIG-INVALID``, count 0. ``auto`` (nfd-gpu's
own) derives it from the hardware: ``none`` when no GPU has MIG on, ``single`` when every GPU
has MIG on and all MIG devices share one profile, ``mixed`` otherwise.
MIG devices carry ``memory``, ``multiprocessors``, ``slices.gi/ci`` and
``engines.copy/decoder/encoder/jpeg/ofa`` from NVML's MIG device attributes.

Sharing (``--sharing-config``, the device plugin's config file, read into
:class:`NvidiaOptions` by :mod:`nfd_gpu.sharing_config`): ``gpu.replicas`` and
``gpu.sharing-strategy`` (``time-slicing`` or ``mps``; as the device plugin's
``api/config/v1/sharing.go``: the strategy is MPS when the ``mps`` block has replicas, and
the replicas come from the ``mps`` block whenever there is one),
``-SHARED`` on the product when replicas > 1 (unless ``renameByDefault``), ``mps.capable``.
MPS with MIG-enabled GPUs is a warning and no label at all (GFD fails its pass).
``gpu.clique`` when every fabric-attached GPU reports the same cluster UUID and clique id.

``gfd.timestamp`` only with ``NvidiaOptions.timestamp`` (``--gfd-timestamp``; the agent
fixes it once at start, as GFD does): off by default because a value that changes on every
restart rewrites the node object. ``vgpu.present`` / ``vgpu.host-driver-version`` /
``vgpu.host-driver-branch`` from the GPUs' vGPU-guest facts
(:mod:`nfd_gpu.discovery.nvidia_vgpu`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from nfd_gpu.labels.profile import LabelProfile
from nfd_gpu.model import Gpu, Partition, Snapshot

PREFIX = "nvidia.com"
_KEEP = re.compile(r"[^A-Za-z0-9_. -]")


def gfd_sanitise(s: str) -> str:
    """GFD ``sanitise()``: drop chars outside ``[A-Za-z0-9-_. ]``, whitespace runs -> ``-``."""
    return "-".join(_KEEP.sub("", s).split())


def _family(major: int, minor: int) -> str:
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor >= 9 else "ampere"
    return {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
            10: "blackwell", 12: "blackwell", 13: "rubin"}.get(major, "undefined")  # fmt: skip


def _version_labels(prefix: str, version: str, names: tuple[str, str, str]) -> dict[str, str]:
    parts = version.split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        return {}
    out = {f"{prefix}.major": parts[0], f"{prefix}.minor": parts[1]}
    if names[2]:
        out[f"{prefix}.{names[2]}"] = parts[2] if len(parts) == 3 else ""
    return out


MIG_STRATEGIES = ("auto", "none", "single", "mixed")
SHARING_STRATEGIES = ("time-slicing", "mps")
GPU_RESOURCE = "nvidia.com/gpu"
_MIG_ATTRS = (
    ("memory", "memory_mib"),
    ("multiprocessors", "compute_units"),
    ("slices.gi", "slices_gi"),
    ("slices.ci", "slices_ci"),
    ("engines.copy", "engines_copy"),
    ("engines.decoder", "engines_decoder"),
    ("engines.encoder", "engines_encoder"),
    ("engines.jpeg", "engines_jpeg"),
    ("engines.ofa", "engines_ofa"),
)


@dataclass(frozen=True)
class NvidiaOptions:
    """Options of the nvidia profile: MIG strategy and the device plugin's sharing config.

    ``mig_strategy`` ``none`` (the default, GFD's) / ``single`` / ``mixed`` behave as GFD's
    ``--mig-strategy``; ``auto`` derives the strategy from the hardware (module docstring).
    ``replicas`` maps a resource name (``nvidia.com/gpu``, ``nvidia.com/mig-1g.5gb``) to its
    replicas in the active block; ``sharing`` is ``time-slicing`` or ``mps``.
    """

    mig_strategy: str = "none"
    sharing: str = "time-slicing"
    replicas: dict[str, int] = field(default_factory=dict)
    rename_by_default: bool = False
    timestamp: int | None = None  # gfd.timestamp (Unix seconds), None: not emitted


def strategy(gpus: list[Gpu], parts: list[Partition]) -> str:
    """The strategy ``auto`` picks: none without MIG, single when uniform, else mixed."""
    if not any(g.mig_enabled for g in gpus):
        return "none"
    profiles = {p.profile for p in parts}
    if all(g.mig_enabled for g in gpus) and len(profiles) == 1:
        return "single"
    return "mixed"


def single_is_valid(gpus: list[Gpu], parts: list[Partition]) -> str | None:
    """None when strategy ``single`` is valid here, else why not (GFD's four conditions)."""
    with_parts = {p.parent for p in parts}
    if any(g.mig_enabled and g.address not in with_parts for g in gpus):
        return "a MIG-enabled GPU has no MIG devices"
    if any(not g.mig_enabled for g in gpus):
        return "MIG-enabled and MIG-disabled GPUs on one node"
    if len({p.profile for p in parts}) != 1:
        return "more than one MIG profile on the node"
    return None


def _sharing(opts: NvidiaOptions, resource: str) -> tuple[str, str, bool]:
    """(replicas, sharing-strategy, shared) of a resource under the sharing config."""
    n = opts.replicas.get(resource, 0)
    if n > 1:
        return str(n), opts.sharing, not opts.rename_by_default
    return "1", "none", False


def clique(gpus: list[Gpu], warnings: list[str] | None = None) -> str | None:
    """``gpu.clique``: one cluster UUID and clique id for every fabric-attached GPU, else None."""
    cliques = {g.clique for g in gpus if g.clique}
    if len(cliques) == 1:
        return cliques.pop()
    if len(cliques) > 1 and warnings is not None:
        warnings.append(f"nvidia: GPUs in several fabric cliques {sorted(cliques)}: no gpu.clique")
    return None


def vgpu_labels(gpus: list[Gpu]) -> dict[str, str] | None:
    """``vgpu.*`` as GFD's vGPU labeler writes them (``internal/lm/vgpu.go``), from the PCI
    vendor capability of the NVIDIA GPUs (``gpus``: all of them, any driver, as GFD lists
    every NVIDIA PCI function).

    Where every NVIDIA function's whole config space was read: ``vgpu.present`` is
    ``true`` when a GPU carries the vGPU capability, else ``false``; host driver version /
    branch from the capability, the last vGPU winning. A vGPU capability without its host
    driver record fails GFD's labelling pass: None (no ``nvidia.com`` label). Where a config
    space is short (an unprivileged reader gets 64 bytes) GFD writes no ``vgpu.*`` label;
    nfd-gpu writes none either, except ``vgpu.present=true`` when NVML reports a vGPU guest
    (virtualization mode VGPU; the value GFD writes when it can read the capability).
    """
    out: dict[str, str] = {}
    if gpus and all(g.sources.get("vgpu_capability") for g in gpus):
        guests = [g for g in gpus if g.sources.get("mode") == "pci-config"]
        out["vgpu.present"] = "true" if guests else "false"
        for g in guests:
            if g.vgpu_host_driver_version is None:
                return None
            out["vgpu.host-driver-version"] = g.vgpu_host_driver_version
            out["vgpu.host-driver-branch"] = g.vgpu_host_driver_branch or ""
    elif any(g.mode == "vgpu-guest" for g in gpus):
        out["vgpu.present"] = "true"
    return out


def gfd_gpus(snap: Snapshot, warnings: list[str] | None = None) -> list[Gpu]:
    """The GPUs GFD labels: those bound to the ``nvidia`` driver (NVML's). Empty when none
    is, or when NVML answered for some GPUs and failed for another.

    GFD only sees GPUs through NVML (``--device-discovery-strategy auto``): without the
    driver it exits (``--fail-on-init-error``, default true); an NVML error on one GPU (lost,
    ...) fails its labelling pass. Either way it writes no ``nvidia.com`` label. GPUs bound
    to another driver (``vfio-pci``) are invisible to NVML. When nfd-gpu itself has no NVML
    (no recorded answers, no library) the driver-bound GPUs are labelled from procfs/PCI.
    """
    gpus = [g for g in snap.gpus if g.vendor == "nvidia"]
    bound = [g for g in gpus if g.driver == "nvidia"]
    nvml = any(g.sources.get("product") == "nvml" for g in bound)
    failed = [g for g in bound if nvml and g.sources.get("product") != "nvml"]
    if gpus and (failed or not bound) and warnings is not None:
        why = f"NVML failed for {failed[0].address}" if failed else "no GPU on the nvidia driver"
        warnings.append(f"nvidia: {why}: no nvidia.com labels (GFD writes none either)")
    return [] if failed else bound


def product_model(gpus: list[Gpu]) -> str:
    """The model ``gpu.*`` describes: a full-GPU model when there is one (GFD writes those
    last), the most numerous of them, on a tie the first in sorted order."""
    full = [g for g in gpus if not g.mig_enabled] or gpus
    names = Counter(gfd_sanitise(g.product or "") for g in full)
    return sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def nvidia_labels(
    snap: Snapshot, opts: NvidiaOptions | None = None, warnings: list[str] | None = None
) -> dict[str, str]:
    opts = opts or NvidiaOptions()
    gpus = gfd_gpus(snap, warnings)
    if not gpus:
        return {}
    out: dict[str, str] = {}
    if opts.timestamp is not None:
        out["gfd.timestamp"] = str(opts.timestamp)
    vgpu = vgpu_labels([g for g in snap.gpus if g.vendor == "nvidia"])
    if vgpu is None:
        if warnings is not None:
            warnings.append(
                "nvidia: a vGPU capability without its host driver record: no nvidia.com "
                "labels (GFD's labelling fails)"
            )
        return {}
    out.update(vgpu)
    driver = snap.driver_versions.get("nvidia", "")
    for key in ("cuda.driver", "cuda.driver-version"):
        rev = "rev" if key == "cuda.driver" else "revision"
        out.update(_version_labels(key, driver, ("major", "minor", rev)))
    if driver and "cuda.driver-version.major" in out:
        out["cuda.driver-version.full"] = driver
    cuda = snap.driver_versions.get("cuda", "")
    for key in ("cuda.runtime", "cuda.runtime-version"):
        out.update(_version_labels(key, cuda, ("major", "minor", "")))
    if "cuda.runtime-version.major" in out:
        out["cuda.runtime-version.full"] = cuda
    out["gpu.machine"] = gfd_sanitise(snap.machine or "") or "unknown"

    name = product_model(gpus)
    mine = [g for g in gpus if gfd_sanitise(g.product or "") == name]
    full = [g for g in mine if not g.mig_enabled]
    dev = (full or mine)[-1]  # GFD keeps the last device of each name
    out["gpu.count"] = str(len(mine))
    replicas, sharing, shared = _sharing(opts, GPU_RESOURCE) if full else ("0", "none", False)
    out["gpu.replicas"] = replicas
    out["gpu.sharing-strategy"] = sharing
    out["gpu.product"] = name + ("-SHARED" if shared else "")
    if dev.memory_mib:
        out["gpu.memory"] = str(dev.memory_mib)
    if dev.compute_major:
        out["gpu.family"] = _family(dev.compute_major, dev.compute_minor or 0)
        out["gpu.compute.major"] = str(dev.compute_major)
        out["gpu.compute.minor"] = str(dev.compute_minor or 0)
    classes = {g.class_id[:6] for g in gpus}
    out["gpu.mode"] = {"030000": "graphics", "030200": "compute"}.get(
        classes.pop() if len(classes) == 1 else "", "unknown"
    )
    out["mig.capable"] = "true" if any(g.mig_capable for g in gpus) else "false"
    mps = opts.sharing == "mps" and any(n > 1 for n in opts.replicas.values())
    if mps and any(g.mig_enabled for g in gpus):
        # GFD isMPSCapable fails its whole labelling pass: no nvidia.com label at all
        if warnings is not None:
            warnings.append(
                "nvidia: MPS sharing is not supported for MIG devices: no nvidia.com labels"
            )
        return {}
    out["mps.capable"] = "true" if mps else "false"
    cl = clique(gpus, warnings)
    if cl:
        out["gpu.clique"] = cl

    addrs = {g.address for g in gpus}
    parts = [p for p in snap.partitions if p.kind == "mig" and p.parent in addrs]
    strat = opts.mig_strategy if opts.mig_strategy != "auto" else strategy(gpus, parts)
    if strat != "none":
        out["mig.strategy"] = strat
    if strat == "single" and not any(g.mig_enabled for g in gpus):
        return {f"{PREFIX}/{k}": v for k, v in out.items()}  # single without MIG: as none
    if strat == "single":
        why = single_is_valid(gpus, parts)
        if why is not None:
            if warnings is not None:
                warnings.append(f"nvidia: invalid MIG strategy single: {why}")
            first_mig = next(g for g in gpus if g.mig_enabled)  # GFD: migEnabledDevices[0]
            out.update(
                {
                    "gpu.product": f"{gfd_sanitise(first_mig.product or '')}-MIG-INVALID",
                    "gpu.count": "0",
                    "gpu.replicas": "0",
                    "gpu.sharing-strategy": "",
                    "gpu.memory": "0",
                }
            )
            return {f"{PREFIX}/{k}": v for k, v in out.items()}
    by_profile: dict[str, list[Partition]] = {}
    for p in parts:
        by_profile.setdefault(p.profile.replace("+", "."), []).append(p)
    model = {g.address: gfd_sanitise(g.product or "") for g in gpus}
    for prof, ps in sorted(by_profile.items()) if strat != "none" else ():
        base = "gpu" if strat == "single" else f"mig-{prof}"
        resource = GPU_RESOURCE if strat == "single" else f"{PREFIX}/mig-{prof}"
        replicas, sharing, shared = _sharing(opts, resource)
        product = f"{model[ps[0].parent]}-MIG-{prof}" + ("-SHARED" if shared else "")
        out[f"{base}.product"] = product
        out[f"{base}.count"] = str(len(ps))
        out[f"{base}.replicas"] = replicas
        out[f"{base}.sharing-strategy"] = sharing
        for label, attr in _MIG_ATTRS:
            value = getattr(ps[0], attr)
            if value is not None and (value or label.startswith(("engines", "slices"))):
                out[f"{base}.{label}"] = str(value)
    return {f"{PREFIX}/{k}": v for k, v in out.items()}


PROFILE = LabelProfile(
    "nvidia", lambda snap, opts, warnings: nvidia_labels(snap, opts.nvidia, warnings)
)
