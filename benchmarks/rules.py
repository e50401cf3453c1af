"""Rule engine benchmark: 1,000 NodeFeatureRule rules on a 16-GPU node.

Usage: python benchmarks/rules.py [--runs N] [--rules N] [--gpus N] [--fixture NAME]

Prints the median evaluation time of N runs (target: under 50 ms) and, next to
it, the median ``nfd_gpu.scan.run_scan`` time of a fixture root
(``tests/fixtures/sysfs/hgx-h100`` by default), without and with the shipped
``rules/``. Then a rule-file reload (what a ConfigMap edit costs every node): the
agent's ``load_rule_file`` of the N rules as one YAML file, every rule new (start-up) and
after one rule's label value edited (the two versions alternate; each load gets the last
one's rules, text digest and outline, as agent/rulefiles.py passes them, so only the
changed rule's text is parsed: rules/incremental.py), interleaved in rounds
(benchmarks/rounds.py) beside its floors on the same file: PyYAML's own safe load
(libyaml), the loader's own YAML parse of the whole file (what a start-up or a change
outside the rules lists costs) and ``json.loads`` of the same rules as JSON. What was alive
before the rounds
is frozen out of the garbage collector first, as the agent's ``run`` freezes its start-up
(nfd_gpu/cli/run.py): the loader's one full collection per file then walks what the
reload made, not this benchmark's own heap.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import rounds

from nfd_gpu.features import Features, add_attributes, add_flags, add_instances, empty
from nfd_gpu.rules import evaluate, ruleset_from_documents

REPO = Path(__file__).resolve().parent.parent


def node_features(gpus: int = 16) -> Features:
    """A 16x H100 node: gpu.device and pci.device instances, gpu.node, modules."""
    f = empty()
    add_flags(
        f, "kernel.loadedmodule", ["nvidia", "nvidia_uvm", "nvidia_modeset", "ast", "mlx5_core"]
    )
    add_attributes(
        f,
        "gpu.node",
        {
            "count": str(gpus),
            "vendor": "nvidia",
            "family": "hopper",
            "memory-mib": "81559",
            "compute.major": "9",
            "compute.minor": "0",
            "mig.capable": "true",
            "driver": "nvidia",
            "nvidia.driver.version": "550.54.15",
        },
    )
    add_instances(
        f,
        "gpu.device",
        [
            {
                "address": f"0000:{0x18 + i:02x}:00.0",
                "vendor": "nvidia",
                "vendor_id": "10de",
                "device_id": "2330",
                "class": "0302",
                "product": "NVIDIA-H100-80GB-HBM3",
                "family": "hopper",
                "memory_mib": "81559",
                "compute_major": "9",
                "compute_minor": "0",
                "driver": "nvidia",
                "numa_node": str(i // 8),
                "mig_capable": "true",
                "pcie_gen": "5",
                "pcie_width": "16",
            }
            for i in range(gpus)
        ],
    )
    pci = [
        {
            "class": "0302",
            "vendor": "10de",
            "device": "2330",
            "subsystem_vendor": "10de",
            "subsystem_device": "16c1",
        }
        for _ in range(gpus)
    ]
    pci += [
        {
            "class": "0680",
            "vendor": "10de",
            "device": "22a3",
            "subsystem_vendor": "10de",
            "subsystem_device": "1796",
        }
        for _ in range(4)
    ]
    pci += [
        {
            "class": "0200",
            "vendor": "15b3",
            "device": "1021",
            "subsystem_vendor": "15b3",
            "subsystem_device": "0041",
            "sriov_totalvfs": "16",
        }
        for _ in range(8)
    ]
    pci.append(
        {
            "class": "0300",
            "vendor": "1a03",
            "device": "2000",
            "subsystem_vendor": "1a03",
            "subsystem_device": "2000",
        }
    )
    add_instances(f, "pci.device", pci)
    return f


def make_rules(n: int = 1000) -> list[dict[str, Any]]:
    """A mix like real rule sets: PCI ID lists, per-GPU instance matches, node
    attributes, regexps, version compares, templates and rule.matched lookups."""
    rules: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 5
        name = f"rule-{i:04d}"
        if kind == 0:
            rules.append(
                {
                    "name": name,
                    "labels": {f"vendor.example.com/pci-{i}": "true"},
                    "matchFeatures": [
                        {
                            "feature": "pci.device",
                            "matchExpressions": {
                                "vendor": {"op": "In", "value": ["10de"]},
                                "device": {"op": "In", "value": [f"{0x2300 + i % 64:04x}", "2330"]},
                                "class": {"op": "InRegexp", "value": ["^03"]},
                            },
                        }
                    ],
                }
            )
        elif kind == 1:
            rules.append(
                {
                    "name": name,
                    "labels": {f"vendor.example.com/big-{i}": "true"},
                    "matchFeatures": [
                        {
                            "feature": "gpu.device",
                            "matchExpressions": {
                                "memory_mib": {"op": "Ge", "value": [str(1024 * (i % 96))]},
                                "compute_major": {"op": "GeLe", "value": ["8", "10"]},
                            },
                        }
                    ],
                }
            )
        elif kind == 2:
            rules.append(
                {
                    "name": name,
                    "vars": {f"v{i}": "true"},
                    "matchFeatures": [
                        {
                            "feature": "gpu.node",
                            "matchExpressions": {
                                "family": {"op": "In", "value": ["hopper", "blackwell"]},
                                "nvidia.driver.version": {
                                    "op": "Gt",
                                    "value": ["535.0"],
                                    "type": "version",
                                },
                            },
                        },
                        {
                            "feature": "kernel.loadedmodule",
                            "matchExpressions": {"nvidia": {"op": "Exists"}},
                        },
                    ],
                }
            )
        elif kind == 3:
            rules.append(
                {
                    "name": name,
                    "labelsTemplate": f"vendor.example.com/count-{i}={{{{ len .gpu.device }}}}",
                    "matchFeatures": [
                        {
                            "feature": "gpu.device",
                            "matchExpressions": {"vendor": {"op": "In", "value": ["nvidia"]}},
                        }
                    ],
                }
            )
        else:
            rules.append(
                {
                    "name": name,
                    "labels": {f"vendor.example.com/chain-{i}": "true"},
                    "matchAny": [
                        {
                            "matchFeatures": [
                                {
                                    "feature": "rule.matched",
                                    "matchExpressions": {f"v{i - 2}": {"op": "IsTrue"}},
                                }
                            ]
                        },
                        {
                            "matchFeatures": [
                                {
                                    "feature": "pci.device",
                                    "matchExpressions": {"vendor": {"op": "In", "value": ["1002"]}},
                                }
                            ]
                        },
                    ],
                }
            )
    return rules


def _median_ms(fn: Any, runs: int) -> tuple[float, float]:
    """Median wall-clock and median CPU (process) time of ``runs`` calls, in ms.
    On a busy machine wall time includes waiting for a CPU; CPU time does not."""
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - t0) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def _cell(t: tuple[float, float], target: str = "") -> str:
    return f"{t[0]:.2f} ms wall, {t[1]:.2f} ms CPU{target}"


def reload_table(n: int, runs: int) -> str:
    """The interleaved reload table (module docstring) for ``n`` rules."""
    import json
    import tempfile

    import yaml

    from nfd_gpu.rules.loader import RuleCache, load_rule_file, load_yaml_documents

    rules = make_rules(n)
    doc = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "bench"},
        "spec": {"rules": rules},
    }
    edited = json.loads(json.dumps(doc))  # the same file with one rule's label value edited
    first = edited["spec"]["rules"][0]
    first["labels"] = {k: "edited" for k in first["labels"]}
    with tempfile.TemporaryDirectory() as tmp:
        path, other = Path(tmp) / "rules.yaml", Path(tmp) / "edited.yaml"
        path.write_text(yaml.safe_dump(doc))
        other.write_text(yaml.safe_dump(edited))
        text, as_json = path.read_text(), json.dumps(doc)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        def full_load() -> None:
            problems: list[str] = []
            assert load_rule_file(path, True, problems, []) and not problems, problems[:3]

        # the agent's reload after a ConfigMap edit: the file rewritten, one rule changed,
        # the last version's rules, text digest and outline at hand, as agent/rulefiles.py
        # passes them; the two versions alternate
        state: dict[str, Any] = {"cache": RuleCache(), "next": path}
        state["objs"] = tuple(load_rule_file(other, True, [], [], state["cache"]))

        def edit_reload() -> None:
            problems: list[str] = []
            last = state["cache"]
            cache = RuleCache(last.fresh, (last.text, state["objs"], ()), last.next_outline)
            f = state["next"]
            objs = tuple(load_rule_file(f, True, problems, [], cache))
            assert objs and not problems, problems[:3]
            assert cache.parsed == 1, cache.parsed
            state["cache"], state["objs"] = cache, objs
            state["next"] = other if f == path else path

        gc.collect()
        gc.freeze()  # as the agent after its start-up (the module docstring)
        full = "load_rule_file, every rule new (start-up)"
        edit = "load_rule_file, 1 rule edited (a ConfigMap edit)"
        res = rounds.interleave(
            {
                full: rounds.in_process(full_load),
                edit: rounds.in_process(edit_reload),
                "yaml.load, CSafeLoader (PyYAML floor)": rounds.in_process(
                    lambda: yaml.load(text, Loader=loader)
                ),
                "the loader's YAML parse alone (load_yaml_documents)": rounds.in_process(
                    lambda: load_yaml_documents(text)
                ),
                "json.loads (the same rules as JSON)": rounds.in_process(
                    lambda: json.loads(as_json)
                ),
            },
            runs,
        )
        gc.unfreeze()
    size = f"{len(text) / 1024:.0f} KiB"
    head = rounds.header(res, f"reload of one rule file, {n} rules ({size} YAML)")
    head += "; start-up objects frozen (gc.freeze), as in the agent"
    table = rounds.table(res, "yaml.load, CSafeLoader (PyYAML floor)")
    lines = []
    for name in (full, edit):
        cpu = res.cpu(name)
        per = [x * 1000 / n * 1000 for x in cpu]
        lines.append(
            f"{name}: {statistics.median(per):.0f} ms CPU per 1,000 rules (median; p10-p90 "
            f"{rounds.quantile(per, 0.1):.0f}-{rounds.quantile(per, 0.9):.0f}; target <= 50)"
        )
    return f"{head}\n\n{table}\n\n" + "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--fixture", default="hgx-h100", help="tests/fixtures/sysfs/<name> to scan")
    args = ap.parse_args()

    feats = node_features(args.gpus)
    doc = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "bench"},
        "spec": {"rules": make_rules(args.rules)},
    }
    t0 = time.perf_counter()
    ruleset = ruleset_from_documents([doc])
    load_ms = (time.perf_counter() - t0) * 1000
    out = evaluate(ruleset, feats)
    assert not out.errors, out.errors[:3]
    eval_ms = _median_ms(lambda: evaluate(ruleset, feats), args.runs)

    load = " ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    scan_cells: list[tuple[str, str]] = []
    root = REPO / "tests" / "fixtures" / "sysfs" / args.fixture
    try:
        from nfd_gpu.scan import run_scan
    except ImportError:  # pragma: no cover - older builds
        scan_cells.append(("scan", "not available (nfd_gpu.scan not importable)"))
    else:
        if root.is_dir():
            scan_ms = _median_ms(lambda: run_scan(root), args.runs)
            scan_cells.append((f"scan {root.name}, median of {args.runs}", _cell(scan_ms)))
            shipped = REPO / "rules"
            scan_rules_ms = _median_ms(lambda: run_scan(root, rules_path=shipped), args.runs)
            scan_cells.append(
                (f"scan {root.name} + rules/, median of {args.runs}", _cell(scan_rules_ms))
            )
        else:
            scan_cells.append(("scan", f"not available (no fixture {root})"))

    rows = [
        ("host", f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load {load}"),
        ("rules", str(ruleset.rule_count)),
        ("GPUs on node", str(args.gpus)),
        ("labels / vars produced", f"{len(out.labels)} / {len(out.vars)}"),
        ("load + validate (once)", f"{load_ms:.1f} ms"),
        (f"evaluate, median of {args.runs}", _cell(eval_ms, " (target < 50 ms)")),
        *scan_cells,
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}} | value")
    print(f"{'-' * w}-+-{'-' * 40}")
    for k, v in rows:
        print(f"{k:<{w}} | {v}")
    print()
    print(reload_table(args.rules, args.runs))


if __name__ == "__main__":
    main()
