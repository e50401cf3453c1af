"""NVIDIA facts without NVML (procfs / sysfs / /dev), and merging of NVIDIA facts into GPUs.

Sources (shared/reference/nvidia.md §4):

* ``proc/driver/nvidia/version``: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  <ver>  <date>``
  (proprietary) or ``NVRM version: NVIDIA UNIX Open Kernel Module for <arch>  <ver>  ...`` (open);
* ``sys/module/nvidia/version``: the bare version;
* ``proc/driver/nvidia/gpus/<bdf>/information``: ``Model``, ``GPU UUID``, ``Device Minor``
  (``key: value``, split on the first ``:``);
* ``proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/ci<C>``: existing MIG instances;
* ``dev/nvidia<minor>``, ``dev/nvidiactl``: device nodes.

:class:`NvidiaFacts` is the common shape of the procfs reader here and of the NVML adapter
(:mod:`nfd_gpu.discovery.nvidia.nvml`); :func:`merge` applies either to the :class:`Gpu` records, so
a fact known both ways gives the same labels with and without NVML.
"""

from __future__ import annotations

import dataclasses
import re
from types import ModuleType

from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING, GpuFacts, NvidiaFacts, normalize_bdf
from nfd_gpu.discovery.nvidia.session import NvmlSession
from nfd_gpu.discovery.source import Context, Step
from nfd_gpu.hostroot import HostRoot
from nfd_gpu.model import Gpu, Partition, Snapshot

__all__ = ["NVML_RECORDING", "GpuFacts", "NvidiaFacts", "normalize_bdf"]  # re-exported

PROC = "proc/driver/nvidia"
_VERSION_RE = re.compile(
    r"NVRM version:\s+NVIDIA UNIX (?P<open>Open )?(?:\S+ )?Kernel Module"
    r"(?: for \S+)?\s+(?P<ver>\S+)"
)
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._+-]+$")


def parse_version_file(text: str) -> tuple[str | None, str | None]:
    """(version, "open" | "proprietary") from ``proc/driver/nvidia/version``."""
    for line in text.splitlines():
        m = _VERSION_RE.search(line)
        if m:
            ver = m.group("ver")
            return (ver if _TOKEN_RE.match(ver) else None), (
                "open" if m.group("open") else "proprietary"
            )
    return None, None


def parse_information(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def read_procfs(host: HostRoot) -> NvidiaFacts:
    """NVIDIA facts from procfs / sysfs / /dev (works without NVML and without libraries)."""
    version: str | None = None
    module: str | None = None
    text = host.read_text(f"{PROC}/version")
    if text:
        version, module = parse_version_file(text)
    if version is None:
        v = host.read_text("sys/module/nvidia/version")
        if v and _TOKEN_RE.match(v.split()[0]):
            version = v.split()[0]

    gpus: list[GpuFacts] = []
    for name in host.listdir(f"{PROC}/gpus"):
        info_text = host.read_text(f"{PROC}/gpus/{name}/information")
        if info_text is None:
            continue
        info = parse_information(info_text)
        minor: int | None = None
        if info.get("Device Minor", "").isdigit():
            minor = int(info["Device Minor"])
        uuid = info.get("GPU UUID") or None
        if uuid is not None and not uuid.startswith(("GPU-", "MIG-")):
            uuid = None  # e.g. "N/A" or garbage
        gpus.append(
            GpuFacts(
                address=normalize_bdf(info.get("Bus Location") or name),
                product=info.get("Model") or None,
                uuid=uuid,
                minor=minor,
                source="procfs",
            )
        )

    partitions: list[Partition] = []
    for g in gpus:
        if g.minor is None:
            continue
        base = f"{PROC}/capabilities/gpu{g.minor}/mig"
        if not host.is_dir(base):
            continue
        for gi in host.listdir(base):
            if not (gi.startswith("gi") and gi[2:].isdigit()):
                continue
            for ci in host.listdir(f"{base}/{gi}"):
                if ci.startswith("ci") and ci[2:].isdigit():
                    # procfs shows that the instance exists, not its size: profile unknown.
                    partitions.append(
                        Partition(parent=g.address, kind="mig", profile="unknown", index=0)
                    )
    partitions = _reindex(partitions)

    nodes = tuple(n for n in host.listdir("dev") if n.startswith("nvidia"))
    return NvidiaFacts(
        source="procfs",
        driver_version=version,
        kernel_module=module,
        gpus=tuple(gpus),
        partitions=tuple(partitions),
        device_nodes=nodes,
    )


def _reindex(parts: list[Partition]) -> list[Partition]:
    """Number the partitions of each parent 0.. in order."""
    seen: dict[str, int] = {}
    out = []
    for p in parts:
        i = seen.get(p.parent, 0)
        seen[p.parent] = i + 1
        out.append(dataclasses.replace(p, index=i))
    return out


_GPU_FIELDS = ("product", "uuid", "memory_mib", "mig_capable", "mig_enabled", "clique")


def merge(gpus: tuple[Gpu, ...], facts: NvidiaFacts) -> tuple[Gpu, ...]:
    """Overlay driver facts on the PCI / table facts of the NVIDIA GPUs.

    Only facts the driver knows replace table facts; a GPU the driver does not know keeps
    its PCI facts. MIG enabled but with no instances still counts as enabled.
    """
    by_addr = {f.address: f for f in facts.gpus}
    with_parts = {p.parent for p in facts.partitions}
    out = []
    for g in gpus:
        f = by_addr.get(g.address)
        if g.vendor != "nvidia" or f is None:
            out.append(g)
            continue
        changes: dict[str, object] = {}
        src = f.source or facts.source
        sources = dict(g.sources)
        for name in _GPU_FIELDS:
            value = getattr(f, name)
            if value is not None:
                changes[name] = value
                sources[name] = src
        if f.mig_enabled is None and g.address in with_parts:
            changes["mig_enabled"] = True
            changes["mig_capable"] = True
            sources["mig_enabled"] = src
        if f.compute_major is not None and f.compute_minor is not None:
            changes["compute_major"] = f.compute_major
            changes["compute_minor"] = f.compute_minor
            sources["compute_capability"] = src
        if f.multiprocessors is not None:
            changes["compute_units"] = f.multiprocessors
            sources["compute_units"] = src
        if f.virtualization in ("vgpu-host", "vgpu-guest"):
            changes["mode"] = f.virtualization
            sources["mode"] = src
        if f.virtualization is not None:
            changes["virtualization"] = f.virtualization
            sources["virtualization"] = src
        changes["sources"] = sources
        out.append(dataclasses.replace(g, **changes))  # type: ignore[arg-type]
    return tuple(out)


# CUDA driver API version of each driver branch, for when NVML (nvmlSystemGetCudaDriverVersion)
# is absent: the CUDA toolkit whose GA release first required that branch, from NVIDIA's
# "CUDA Toolkit and Corresponding Driver Versions" table (CUDA Toolkit Release Notes,
# docs.nvidia.com/cuda/cuda-toolkit-release-notes, Table 3; e.g. "CUDA 13.0 GA >= 580.65.06",
# "CUDA 12.4 GA >= 550.54.14", "CUDA 11.4.0 GA >= 470.42.01"). 565 reports 12.7 (no 12.7
# toolkit was released; nvidia-smi of R565 prints "CUDA Version: 12.7"). A branch not listed
# gives no CUDA version: never a guess. Checked against the H200 capture (580.159.04: NVML
# 13000 -> 13.0) and the fixtures' recordings (550.54.15: 12040 -> 12.4).
CUDA_BY_BRANCH: dict[int, str] = {
    410: "10.0", 418: "10.1", 440: "10.2",
    450: "11.0", 455: "11.1", 460: "11.2", 465: "11.3", 470: "11.4", 495: "11.5",
    510: "11.6", 515: "11.7", 520: "11.8",
    525: "12.0", 530: "12.1", 535: "12.2", 545: "12.3", 550: "12.4", 555: "12.5",
    560: "12.6", 565: "12.7", 570: "12.8", 575: "12.9",
    580: "13.0", 590: "13.1",
}  # fmt: skip


def cuda_from_driver(version: str | None) -> str | None:
    """The CUDA driver API version of a driver version's branch (``580.159.04`` -> ``13.0``)."""
    branch = (version or "").split(".", 1)[0]
    return CUDA_BY_BRANCH.get(int(branch)) if branch.isdigit() and len(branch) < 6 else None


def collect(
    host: HostRoot, nvml_lib: ModuleType | None = None, session: NvmlSession | None = None
) -> NvidiaFacts:
    """procfs facts, overlaid with NVML's when NVML answers (see ``nvml_session``).

    ``nvml_lib`` replaces the library (``nfd-gpu snapshot`` passes a recording wrapper);
    ``session`` says which NVML may be asked and keeps the agent's state between passes.
    NVML warnings (a lost GPU) go to the host's warnings; such a GPU keeps its procfs facts.
    Without NVML facts the CUDA version comes from the driver branch (:data:`CUDA_BY_BRANCH`).
    """
    procfs = read_procfs(host)
    if session is None:
        session = NvmlSession(lib=nvml_lib)
    facts = session.query(host, procfs)
    if facts is None:
        cuda = cuda_from_driver(procfs.driver_version)
        return dataclasses.replace(procfs, cuda_version=cuda) if cuda else procfs
    known = {g.address for g in facts.gpus}
    by_addr = {g.address: g for g in facts.gpus}
    gpus = list(facts.gpus)
    for pg in procfs.gpus:
        ng = by_addr.get(pg.address)
        if ng is None:
            gpus.append(pg)
        elif ng.minor is None and pg.minor is not None:
            gpus[gpus.index(ng)] = dataclasses.replace(ng, minor=pg.minor)
    parts = list(facts.partitions) + [p for p in procfs.partitions if p.parent not in known]
    driver = facts.driver_version or procfs.driver_version
    return NvidiaFacts(
        source="nvml",
        driver_version=driver,
        kernel_module=procfs.kernel_module,
        cuda_version=facts.cuda_version or cuda_from_driver(driver),
        gpus=tuple(gpus),
        partitions=tuple(parts),
        device_nodes=procfs.device_nodes,
    )


def apply(
    facts: NvidiaFacts, gpus: tuple[Gpu, ...], driver_versions: dict[str, str]
) -> tuple[tuple[Gpu, ...], tuple[Partition, ...], dict[str, str]]:
    """Merge into the GPU records; fill the driver version when sysfs has none; add CUDA."""
    versions = dict(driver_versions)
    if "nvidia" not in versions and facts.driver_version:
        versions["nvidia"] = facts.driver_version
    if facts.cuda_version:
        versions["cuda"] = facts.cuda_version
    addrs = {g.address for g in gpus}
    parts = tuple(p for p in facts.partitions if p.parent in addrs)
    return merge(gpus, facts), parts, versions


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    facts = collect(ctx.host, ctx.nvml_lib, ctx.nvml)
    gpus, parts, versions = apply(facts, snap.gpus, snap.driver_versions)
    return dataclasses.replace(
        snap, gpus=gpus, partitions=snap.partitions + parts, driver_versions=versions
    )


SOURCE = Step("nvidia", _discover, needs=("nvidia",))
