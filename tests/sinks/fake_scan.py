"""Stand-in for ``nfd_gpu.scan.run_scan`` until the lead's scan pipeline is merged.

Reads a tiny host root in real sysfs shape (``sys/bus/pci/devices/<bdf>/{vendor,class}``)
and returns labels/features with the ScanResult contract. Used only by the agent tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu import features as F

VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
PREFIX = "gpu.feature.node.kubernetes.io/"


@dataclass
class ScanResult:
    labels: dict[str, str]
    features: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    gpu_count_by_vendor: dict[str, int] = field(default_factory=dict)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def run_scan(
    root: str | os.PathLike[str] = "/",
    *,
    profiles: Any = ("neutral",),
    rules_path: str | None = None,
    **_: Any,  # options of the real scan this stand-in ignores (nvml, nvidia_options)
) -> ScanResult:
    devdir = os.path.join(os.fspath(root), "sys", "bus", "pci", "devices")
    feats = F.empty()
    counts: dict[str, int] = {}
    gpus = []
    warnings: list[str] = []
    for bdf in sorted(os.listdir(devdir)) if os.path.isdir(devdir) else []:
        try:
            vendor = _read(os.path.join(devdir, bdf, "vendor"))
            cls = _read(os.path.join(devdir, bdf, "class"))
        except OSError as e:
            warnings.append(f"{bdf}: {e.strerror}")
            continue
        if vendor in VENDORS and cls[:4] in ("0x03", "0x12"):
            name = VENDORS[vendor]
            counts[name] = counts.get(name, 0) + 1
            gpus.append({"address": bdf, "vendor": vendor[2:], "class": cls[2:]})
    labels: dict[str, str] = {}
    if gpus:
        labels[PREFIX + "present"] = "true"
        labels[PREFIX + "count"] = str(len(gpus))
        for v, n in counts.items():
            labels[f"{PREFIX}{v}.count"] = str(n)
        F.add_instances(feats, "gpu.device", gpus)
        F.add_attributes(feats, "gpu.node", {"count": str(len(gpus))})
    return ScanResult(labels, feats, warnings, counts)
