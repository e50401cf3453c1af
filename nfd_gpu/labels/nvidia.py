"""The ``nvidia`` compatibility profile: GPU Feature Discovery's keys and value formats.

Keys under ``nvidia.com/`` as GFD v0.20.0 writes them (shared/reference/nvidia.md §1), with
the MIG strategy derived from the hardware: ``none`` when no GPU has MIG on, ``single`` when
every GPU has MIG on and all MIG devices share one profile, ``mixed`` otherwise.

Deterministic product on mixed nodes (GFD picks by map order, its issues #27 / #731): the
``gpu.*`` labels describe the most numerous model; on a tie, the first name in sorted order.
``gpu.count`` is the number of GPUs of that model, as in GFD.

Not emitted: ``gfd.timestamp`` (labels must not change between passes), ``gpu.clique``,
``vgpu.*``, MIG ``engines.*`` / ``slices.*`` (not recorded yet); sharing config files are not
read yet, so ``gpu.replicas`` is 1 (0 for MIG-enabled GPUs) and ``gpu.sharing-strategy`` none.
"""

from __future__ import annotations

import re
from collections import Counter

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


def strategy(gpus: list[Gpu], parts: list[Partition]) -> str:
    if not any(g.mig_enabled for g in gpus):
        return "none"
    profiles = {p.profile for p in parts}
    if all(g.mig_enabled for g in gpus) and len(profiles) == 1:
        return "single"
    return "mixed"


def nvidia_labels(snap: Snapshot) -> dict[str, str]:
    gpus = [g for g in snap.gpus if g.vendor == "nvidia"]
    if not gpus:
        return {}
    out: dict[str, str] = {}
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

    names = Counter(gfd_sanitise(g.product or "") for g in gpus)
    name = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    mine = [g for g in gpus if gfd_sanitise(g.product or "") == name]
    first = mine[0]
    full = [g for g in mine if not g.mig_enabled]
    out["gpu.count"] = str(len(mine))
    out["gpu.replicas"] = "1" if full else "0"
    out["gpu.sharing-strategy"] = "none"
    out["gpu.product"] = name
    if first.memory_mib:
        out["gpu.memory"] = str(first.memory_mib)
    if first.compute_major:
        out["gpu.family"] = _family(first.compute_major, first.compute_minor or 0)
        out["gpu.compute.major"] = str(first.compute_major)
        out["gpu.compute.minor"] = str(first.compute_minor or 0)
    classes = {g.class_id[:6] for g in gpus}
    out["gpu.mode"] = {"030000": "graphics", "030200": "compute"}.get(
        classes.pop() if len(classes) == 1 else "", "unknown"
    )
    out["mig.capable"] = "true" if any(g.mig_capable for g in gpus) else "false"
    out["mps.capable"] = "false"

    addrs = {g.address for g in gpus}
    parts = [p for p in snap.partitions if p.kind == "mig" and p.parent in addrs]
    strat = strategy(gpus, parts)
    if strat != "none":
        out["mig.strategy"] = strat
    by_profile: dict[str, list[Partition]] = {}
    for p in parts:
        by_profile.setdefault(p.profile.replace("+", "."), []).append(p)
    model = {g.address: gfd_sanitise(g.product or "") for g in gpus}
    for prof, ps in sorted(by_profile.items()) if strat != "none" else ():
        base = "gpu" if strat == "single" else f"mig-{prof}"
        out[f"{base}.product"] = f"{model[ps[0].parent]}-MIG-{prof}"
        out[f"{base}.count"] = str(len(ps))
        out[f"{base}.replicas"] = "1"
        out[f"{base}.sharing-strategy"] = "none"
        if ps[0].memory_mib:
            out[f"{base}.memory"] = str(ps[0].memory_mib)
        if ps[0].compute_units:
            out[f"{base}.multiprocessors"] = str(ps[0].compute_units)
    return {f"{PREFIX}/{k}": v for k, v in out.items()}
