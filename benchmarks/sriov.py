#!/usr/bin/env python3
"""SR-IOV hosts: the agent's steady-state pass with and without rules, and the GPU step's
growth with the number of VFs.

1. Interleaved rounds (benchmarks/rounds.py) of the agent's scan (``run_scan`` as
   ``Agent.scan`` calls it: ``nfd_attributes=False``, the rule set loaded once, the
   agent's ``RuleOutputs``, so an unchanged pass reuses the rule output) on an SR-IOV
   host root: the ``mi300x-sriov-host`` fixture (tests/fixtures/sysfs) and a synthetic
   tree of ``--functions`` PCI functions (benchmarks/scan.py's builder: 16 MI300X with 63
   VFs each, NICs with 127 VFs each). Contenders: no rules; ``--rules`` rules of
   benchmarks/rules.py's mix (PCI ids, GPU attributes, templates, rule.matched; none names
   an IOMMU attribute); the same plus one rule that names ``iommu_group/type`` (the
   attributes are read then: two reads per function). Ratios to "no rules".
2. The ``gpus`` discovery step (classify, VFs by PF, one Gpu per PF) on synthetic PCI
   lists of G GPUs with V VFs each: time per function stays flat when V or G doubles (an
   O(GPUs x VFs) step would double it).

    python benchmarks/sriov.py [--rounds 41] [--rules 1000] [--functions 4096]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "benchmarks"))
if importlib.util.find_spec("nfd_gpu") is None:  # not installed: the source tree
    sys.path.insert(0, str(REPO))

import rounds  # noqa: E402
import scan as scan_bench  # noqa: E402

from nfd_gpu.rules import ruleset_from_documents  # noqa: E402
from nfd_gpu.scan import RuleOutputs, run_scan  # noqa: E402

IOMMU_RULE = {
    "name": "iommu-dma",
    "labels": {"example.com/iommu-dma": "true"},
    "matchFeatures": [
        {
            "feature": "pci.device",
            "matchExpressions": {"iommu_group/type": {"op": "In", "value": ["DMA", "DMA-FQ"]}},
        }
    ],
}


def _ruleset(rules: list[dict[str, Any]]) -> Any:
    return ruleset_from_documents([{"rules": rules}])


def agent_scan(root: Path, ruleset: Any) -> Any:
    """A contender: the agent's scan of ``root`` (its own RuleOutputs, as one agent)."""
    reuse = RuleOutputs()

    def run() -> None:
        r = run_scan(root, nfd_attributes=False, rules=ruleset, rule_outputs=reuse)
        assert r.complete and not r.rule_errors, (r.errors, r.rule_errors[:3])

    return rounds.in_process(run)


def passes(root: Path, label: str, n_rules: int, runs: int) -> None:
    import rules as rules_bench

    mix = rules_bench.make_rules(n_rules)
    sets = {
        "no rules": None,
        f"{n_rules} rules": _ruleset(mix),
        f"{n_rules} rules + 1 naming iommu_group/type": _ruleset([*mix, IOMMU_RULE]),
    }
    functions = len(run_scan(root, nfd_attributes=False).snapshot.pci)
    res = rounds.interleave({k: agent_scan(root, v) for k, v in sets.items()}, runs)
    notes = {
        "no rules": "the agent's steady-state pass",
        f"{n_rules} rules": "rule output reused (features unchanged); IOMMU attributes not read",
        f"{n_rules} rules + 1 naming iommu_group/type": "the IOMMU attributes read",
    }
    print(f"\n{rounds.header(res, f'{label}: {functions} PCI functions, steady-state passes')}\n")
    print(rounds.table(res, "no rules", notes))


def gpu_step(runs: int) -> None:
    """Rows of the gpus step on synthetic PCI lists."""
    from nfd_gpu.discovery import gpus
    from nfd_gpu.discovery.registry import VENDORS, by_pci_id
    from nfd_gpu.discovery.source import Context
    from nfd_gpu.host import HostRoot
    from nfd_gpu.model import PciDevice, Snapshot

    src = gpus.source(by_pci_id(VENDORS))
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(HostRoot(tmp))
        print("\n| GPUs x VFs each | functions | gpus step ms median | us per function |")
        print("|---|---|---|---|")
        for n_gpus, n_vfs in ((16, 63), (16, 126), (32, 126), (64, 252)):
            pci: list[PciDevice] = []
            for g in range(n_gpus):
                dom, bus = divmod(g, 256)
                pf = f"{dom:04x}:{bus:02x}:00.0"
                vfs = [
                    f"{dom:04x}:{bus:02x}:{(v + 1) // 8:02x}.{(v + 1) % 8}" for v in range(n_vfs)
                ]
                pci.append(PciDevice(pf, "120000", "1002", "74a1", driver="gim",
                                     sriov_totalvfs=n_vfs, sriov_numvfs=n_vfs,
                                     virtfns=tuple(vfs)))  # fmt: skip
                pci += [
                    PciDevice(a, "120000", "1002", "74b5", driver="vfio-pci", physfn=pf)
                    for a in vfs
                ]
            snap = Snapshot(root=tmp, pci=tuple(pci))
            out = src.discover(ctx, snap)
            assert len(out.gpus) == n_gpus and len(out.gpus[0].vfs) == n_vfs
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                src.discover(ctx, snap)
                times.append(time.perf_counter() - t)
            t_ = statistics.median(times)
            per = t_ / len(pci) * 1e6
            print(f"| {n_gpus} x {n_vfs} | {len(pci)} | {t_ * 1000:.2f} | {per:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--functions", type=int, default=4096, help="synthetic tree (0: none)")
    args = ap.parse_args()
    fixture = REPO / "tests/fixtures/sysfs/mi300x-sriov-host"
    passes(fixture, "mi300x-sriov-host fixture", args.rules, args.rounds)
    if args.functions:
        with tempfile.TemporaryDirectory(prefix="nfd-gpu-bench-") as tmp:
            root = scan_bench.build_tree(Path(tmp), args.functions)
            passes(root, "synthetic SR-IOV tree", args.rules, args.rounds)
    gpu_step(max(5, args.rounds // 4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
