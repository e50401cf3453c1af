"""One pass: discover -> snapshot -> label. Never raises for hardware problems."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from nfd_gpu import features as F
from nfd_gpu.discovery import amd, amdgpuinfo, pci, system
from nfd_gpu.discovery import gpus as gpu_discovery
from nfd_gpu.discovery.pciids import PciIds
from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.hostroot import HostRoot
from nfd_gpu.labels.neutral import NAMESPACE, neutral_labels
from nfd_gpu.labels.validate import filter_labels
from nfd_gpu.model import Snapshot

PROFILES = ("neutral",)
KNOWN_PROFILES = ("neutral", "amd")


@dataclass
class ScanResult:
    snapshot: Snapshot
    labels: dict[str, str]
    features: F.Features
    warnings: list[str] = field(default_factory=list)
    rule_errors: list[tuple[str, str]] = field(default_factory=list)  # (rule, message)

    @property
    def gpu_count_by_vendor(self) -> dict[str, int]:
        return dict(Counter(g.vendor for g in self.snapshot.gpus))


def discover(host: HostRoot) -> Snapshot:
    """Read the host into a :class:`Snapshot` (read-only; failures become warnings)."""
    devices = pci.discover(host)
    gpu_fns, vfs, switches = gpu_discovery.classify(devices)
    ids = PciIds(host)
    gpus = tuple(gpu_discovery.build_gpu(d, vfs, ids) for d in gpu_fns)
    if any(g.vendor == "amd" for g in gpus):
        gpus = amdgpuinfo.apply(gpus, amdgpuinfo.query(host))
    gpus, amd_partitions = amd.enrich(host, gpus)
    return Snapshot(
        root=host.root,
        pci=devices,
        gpus=gpus,
        nvswitches=tuple(switches),
        partitions=amd_partitions,
        loaded_modules=system.loaded_modules(host),
        driver_versions=system.module_versions(host),
        machine=system.machine(host),
        warnings=tuple(host.warnings),
    )


def label(
    snap: Snapshot, profiles: Sequence[str] = PROFILES, namespace: str = NAMESPACE
) -> tuple[dict[str, str], list[str]]:
    """Labels of the chosen profiles, validated; invalid ones dropped with a warning."""
    warnings: list[str] = []
    labels: dict[str, str] = {}
    for p in profiles:
        if p == "neutral":
            labels.update(neutral_labels(snap, namespace))
        elif p == "amd":
            from nfd_gpu.labels.amd import amd_labels

            labels.update(amd_labels(snap))
        else:
            raise ValueError(f"unknown label profile {p!r} (known: {', '.join(KNOWN_PROFILES)})")
    return filter_labels(labels, warnings), warnings


def run_scan(
    root: str | os.PathLike[str] = "/",
    *,
    profiles: Sequence[str] = PROFILES,
    rules_path: str | os.PathLike[str] | None = None,
    namespace: str = NAMESPACE,
) -> ScanResult:
    """Discover, label and apply custom rules. Hardware problems are warnings, never
    exceptions; an invalid rule file raises :class:`nfd_gpu.rules.RuleError`."""
    host = HostRoot(root)
    snap = discover(host)
    labels, warnings = label(snap, profiles, namespace)
    feats = snapshot_features(snap)
    all_warnings = list(snap.warnings) + warnings
    rule_errors: list[tuple[str, str]] = []
    if rules_path is not None:
        from nfd_gpu.rules import evaluate, load_rules  # lazy: only when rules are used

        out = evaluate(load_rules(os.fspath(rules_path)), feats)
        labels.update(out.labels)  # rule labels override built-in ones, as in nfd-master
        rule_errors = list(out.errors)
        all_warnings += [f"rule {name}: {msg}" for name, msg in out.errors]
    return ScanResult(
        snapshot=snap,
        labels=labels,
        features=feats,
        warnings=all_warnings,
        rule_errors=rule_errors,
    )
