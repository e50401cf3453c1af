"""The ``nvidia`` source: what the driver says, merged into the NVIDIA GPU records.

- procfs is read, overlaid with NVML's answers when NVML answers.
- procfs is :mod:`~nfd_gpu.discovery.nvidia.procfs`.
- NVML is :mod:`~nfd_gpu.discovery.nvidia.nvml`, asked through
  :mod:`~nfd_gpu.discovery.nvidia.session`.
- Both return :class:`~nfd_gpu.discovery.nvidia.facts.NvidiaFacts`.
- :func:`merge` applies either to the :class:`Gpu` records.
  So a fact known both ways gives the same labels with and without NVML.
"""

from __future__ import annotations

from types import ModuleType
from typing import TypeVar

from nfd_gpu.catalog import tables
from nfd_gpu.discovery.nvidia import health
from nfd_gpu.discovery.nvidia.facts import GpuFacts, NvidiaFacts
from nfd_gpu.discovery.nvidia.procfs import read_procfs
from nfd_gpu.discovery.nvidia.session import NvmlSession
from nfd_gpu.discovery.pciaddr import PciAddress
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, NvidiaGpu, Partition, Snapshot
from nfd_gpu.record import replace

T = TypeVar("T")


def table_facts(g: Gpu) -> Gpu:
    """Return an NVIDIA GPU with the model table's compute capability and MIG capability.

    It is not MIG-capable when the table does not say.
    """
    info = tables.lookup("nvidia", g.device_id, g.revision)
    provenance = dict(g.provenance)
    major = info.compute_major if info else None
    minor = info.compute_minor if info else None
    mig_capable = info.mig_capable if info else None
    if major is not None:
        provenance["compute_capability"] = "table"
    if mig_capable is not None:
        provenance["mig_capable"] = "table"
    nvidia = NvidiaGpu(compute_major=major, compute_minor=minor, mig_capable=bool(mig_capable))
    return replace(g, nvidia=nvidia, provenance=provenance)


def merge(gpus: tuple[Gpu, ...], facts: NvidiaFacts) -> tuple[Gpu, ...]:
    """Overlay driver facts on the PCI and table facts of the NVIDIA GPUs.

    - Only facts the driver knows replace table facts.
    - A GPU the driver does not know keeps its PCI facts.
    - MIG enabled but with no instances still counts as enabled.
    """
    by_addr = {PciAddress.parse(f.address): f for f in facts.gpus}
    with_parts = {PciAddress.parse(p.parent) for p in facts.partitions}
    out = []
    for g in gpus:
        addr = PciAddress.parse(g.address)
        f = by_addr.get(addr) if addr is not None else None
        if g.vendor != "nvidia" or f is None:
            out.append(g)
        else:
            out.append(_merge_one(g, f, f.source or facts.source, addr in with_parts))
    return tuple(out)


def _merge_one(g: Gpu, f: GpuFacts, src: str, has_partitions: bool) -> Gpu:
    provenance = dict(g.provenance)

    def known(name: str, new: T | None, old: T | None) -> T | None:
        """Return the driver's value when it knows one, recorded in ``provenance``; else ``old``."""
        if new is None:
            return old
        provenance[name] = src
        return new

    nv = g.nvidia
    mig_capable = known("mig_capable", f.mig_capable, nv.mig_capable)
    mig_enabled = known("mig_enabled", f.mig_enabled, nv.mig_enabled)
    if f.mig_enabled is None and has_partitions:
        mig_enabled = mig_capable = True
        provenance["mig_enabled"] = src
    major, minor = nv.compute_major, nv.compute_minor
    if f.compute_major is not None and f.compute_minor is not None:
        major, minor = f.compute_major, f.compute_minor
        provenance["compute_capability"] = src
    mode = g.mode
    gpu_health = g.health.read(f.health_signals, f.health_reasons)
    if f.virtualization in ("vgpu-host", "vgpu-guest"):
        mode = f.virtualization
        provenance["mode"] = src
    nvidia = replace(
        nv,
        compute_major=major,
        compute_minor=minor,
        mig_capable=mig_capable,
        mig_enabled=mig_enabled,
        virtualization=known("virtualization", f.virtualization, nv.virtualization),
        clique=known("clique", f.clique, nv.clique),
        nvml_answered=src == "nvml" and f.product is not None,
    )
    return replace(
        g,
        product=known("product", f.product, g.product),
        uuid=known("uuid", f.uuid, g.uuid),
        memory_mib=known("memory_mib", f.memory_mib, g.memory_mib),
        compute_units=known("compute_units", f.multiprocessors, g.compute_units),
        mode=mode,
        nvidia=nvidia,
        provenance=provenance,
        health=gpu_health,
    )


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
    """Return the CUDA driver API version of a driver branch: ``580.159.04`` -> ``13.0``."""
    branch = (version or "").split(".", 1)[0]
    return CUDA_BY_BRANCH.get(int(branch)) if branch.isdigit() and len(branch) < 6 else None


def collect(
    host: HostRoot, nvml_lib: ModuleType | None = None, session: NvmlSession | None = None
) -> NvidiaFacts:
    """Return procfs facts, overlaid with NVML's when NVML answers; see ``session``.

    - ``nvml_lib`` replaces the library; ``nfd-gpu snapshot`` passes a recording wrapper.
    - ``session`` says which NVML may be asked, and keeps the agent's state between passes.
    - NVML warnings, such as a lost GPU, go to the host's warnings.
      Such a GPU keeps its procfs facts.
    - Without NVML facts, the CUDA version comes from the driver branch: :data:`CUDA_BY_BRANCH`.
    """
    procfs = read_procfs(host)
    if session is None:
        session = NvmlSession(lib=nvml_lib)
    facts = session.query(host, procfs)
    if facts is None:
        cuda = cuda_from_driver(procfs.driver_version)
        return replace(procfs, cuda_version=cuda, nvml_init_error=session.init_error)
    known = {g.address for g in facts.gpus}
    by_addr = {g.address: g for g in facts.gpus}
    gpus = list(facts.gpus)
    for pg in procfs.gpus:
        ng = by_addr.get(pg.address)
        if ng is None:  # the driver has it, NVML does not answer for it (GPU is lost)
            lost = replace(
                pg, health_signals=("nvml.device",), health_reasons=(health.NOT_ANSWERING,)
            )
            gpus.append(lost)
        elif ng.minor is None and pg.minor is not None:
            gpus[gpus.index(ng)] = replace(ng, minor=pg.minor)
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
    """Merge into the GPU records, over the model table's facts.

    Fill the driver version when sysfs has none, and add CUDA.
    """
    versions = dict(driver_versions)
    if "nvidia" not in versions and facts.driver_version:
        versions["nvidia"] = facts.driver_version
    if facts.cuda_version:
        versions["cuda"] = facts.cuda_version
    # each partition named by its GPU's own (sysfs) address, matched as a number
    own = {a: g.address for g in gpus if (a := PciAddress.parse(g.address)) is not None}
    parts = tuple(
        replace(p, parent=own[a])
        for p in facts.partitions
        if (a := PciAddress.parse(p.parent)) in own
    )
    # an integrated GPU's facts are the Tegra table's and CUDA's (nvidia-tegra), not PCI's
    with_table = tuple(
        table_facts(g) if g.vendor == "nvidia" and not g.integrated else g for g in gpus
    )
    merged = merge(with_table, facts)
    if facts.nvml_init_error:
        merged = tuple(_init_failed(g, facts.nvml_init_error) for g in merged)
    return merged, parts, versions


DRIVER_NOT_LOADED = "Driver Not Loaded"  # nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED)


def _init_failed(g: Gpu, why: str) -> Gpu:
    """Return the init error on an NVIDIA GPU.

    - Bound to ``nvidia``, it is a GPU the driver has and cannot use: ``nvml-init-failed``.
    - Not when the driver is not loaded yet: NVML's ``Driver Not Loaded``.
      The driver container is starting; that is not a fault.
    """
    if g.vendor != "nvidia":
        return g
    if g.driver == "nvidia" and DRIVER_NOT_LOADED not in why:
        g = replace(g, health=g.health.read(("nvml.init",), (health.INIT_FAILED,)))
    return replace(g, nvidia=replace(g.nvidia, nvml_init_error=why))


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    facts = collect(ctx.host, ctx.nvml_lib, ctx.nvml)
    gpus, parts, versions = apply(facts, snap.gpus, snap.driver_versions)
    return replace(snap, gpus=gpus, partitions=snap.partitions + parts, driver_versions=versions)


SOURCE = Source("nvidia", _discover, needs=("nvidia",))
