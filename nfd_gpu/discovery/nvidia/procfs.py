"""NVIDIA facts without NVML: procfs, sysfs and /dev; no library needed.

Sources: see docs/nvidia.md. Verbatim examples are in tests/data/nvidia/procfs_sysfs_examples.txt.

* ``proc/driver/nvidia/version``, proprietary:
  ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  <ver>  <date>``.
  Open: ``NVRM version: NVIDIA UNIX Open Kernel Module for <arch>  <ver>  ...``.
* ``sys/module/nvidia/version``: the bare version.
* ``proc/driver/nvidia/gpus/<bdf>/information``: ``Model``, ``GPU UUID``, ``Device Minor``.
  Lines are ``key: value``, split on the first ``:``.
* ``proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/ci<C>``: existing MIG instances.
* ``dev/nvidia<minor>``, ``dev/nvidiactl``: device nodes.

:func:`read_procfs` returns the same :class:`~nfd_gpu.discovery.nvidia.facts.NvidiaFacts`
shape as the NVML adapter, :mod:`nfd_gpu.discovery.nvidia.nvml`.
"""

from __future__ import annotations

import re

from nfd_gpu.discovery.nvidia.facts import GpuFacts, NvidiaFacts
from nfd_gpu.discovery.pciaddr import canonical
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Partition
from nfd_gpu.record import replace

PROC = "proc/driver/nvidia"
_VERSION_RE = re.compile(
    r"NVRM version:\s+NVIDIA UNIX (?P<open>Open )?(?:\S+ )?Kernel Module"
    r"(?: for \S+)?\s+(?P<ver>\S+)"
)
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._+-]+$")


def parse_version_file(text: str) -> tuple[str | None, str | None]:
    """Return the version and "open" or "proprietary" from ``proc/driver/nvidia/version``."""
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
    """Read NVIDIA facts from procfs, sysfs and /dev; it works without NVML and libraries."""
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
        address = canonical(info.get("Bus Location")) or canonical(name)
        if address is None:
            host.warn(f"/{PROC}/gpus/{name}: no PCI address (Bus Location), ignored")
            continue
        gpus.append(
            GpuFacts(
                address=address,
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
        out.append(replace(p, index=i))
    return out
