"""engine.RuleMemo: an evaluation that runs again only the rules a change reaches gives
exactly the output of a full evaluation, over a long sequence of changed features."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from nfd_gpu.features import Features
from nfd_gpu.rules import engine, ruleset_from_documents
from nfd_gpu.rules.engine import evaluate
from nfd_gpu.rules.memo import RuleMemo
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root


def _rules() -> list[dict[str, Any]]:
    """Every way a rule reads its input: named attributes, flags, instances, matchName,
    templates, matchAny, rule.matched by name and by template, a rule that errors when an
    element has a value, dynamic values, taints."""
    gpu = "gpu.device"
    return [
        {
            "name": "mem",
            "labels": {"example.com/mem": "big"},
            "vars": {"mem": "true"},
            "matchFeatures": [
                {"feature": gpu, "matchExpressions": {"memory_mib": {"op": "Gt", "value": ["1"]}}}
            ],
        },
        {
            "name": "health",
            "labels": {"example.com/sick": "yes"},
            "matchFeatures": [
                {"feature": gpu, "matchExpressions": {"health": {"op": "NotIn", "value": ["ok"]}}}
            ],
        },
        {
            "name": "count",
            "labelsTemplate": "example.com/count={{ len .gpu.device }}",
            "matchFeatures": [{"feature": gpu, "matchExpressions": {"vendor": {"op": "Exists"}}}],
        },
        {
            "name": "names",
            "varsTemplate": "{{ range .gpu.node }}n-{{ .Name }}=x\n{{ end }}",
            "matchFeatures": [
                {"feature": "gpu.node", "matchName": {"op": "InRegexp", "value": ["^c"]}}
            ],
        },
        {
            "name": "module",
            "labels": {"example.com/nv": "loaded"},
            "matchAny": [
                {
                    "matchFeatures": [
                        {
                            "feature": "kernel.loadedmodule",
                            "matchExpressions": {"nvidia": {"op": "Exists"}},
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
        },
        {
            "name": "chained",
            "labels": {"example.com/chained": "true", "example.com/dyn": "@gpu.node.count"},
            "matchFeatures": [
                {"feature": "rule.matched", "matchExpressions": {"mem": {"op": "IsTrue"}}}
            ],
        },
        {
            "name": "seen-all",
            "labelsTemplate": "{{ range .rule.matched }}example.com/m-{{ .Name }}=y\n{{ end }}",
            "matchFeatures": [{"feature": "rule.matched", "matchName": {"op": "Exists"}}],
        },
        {
            "name": "errs",  # Gt on a value that is no number: an error when it is there
            "labels": {"example.com/never": "x"},
            "matchFeatures": [
                {"feature": gpu, "matchExpressions": {"product": {"op": "Gt", "value": ["1"]}}}
            ],
        },
        {
            "name": "taint",
            "taints": [{"key": "feature.node.kubernetes.io/sick", "effect": "NoSchedule"}],
            "matchFeatures": [
                {
                    "feature": "rule.matched",
                    "matchExpressions": {"example.com/sick": {"op": "In", "value": ["yes"]}},
                }
            ],
        },
        {
            "name": "missing",
            "labels": {"example.com/none": "x"},
            "matchFeatures": [{"feature": "gpu.partition", "matchExpressions": {}}],
        },
    ]


def _mutate(rng: random.Random, f: Features) -> None:
    """One change a pass can see: an attribute of a GPU, a GPU lost or back, a module, a
    node attribute, a feature gone."""
    insts = f["instances"].get("gpu.device", {}).get("elements", [])
    choice = rng.randrange(7)
    if choice == 0 and insts:
        rng.choice(insts)["attributes"]["health"] = rng.choice(["ok", "degraded", "failed"])
    elif choice == 1 and insts:
        rng.choice(insts)["attributes"]["memory_mib"] = rng.choice(["0", "81559", "x"])
    elif choice == 2 and len(insts) > 1:
        insts.pop(rng.randrange(len(insts)))
    elif choice == 3 and insts:
        insts.append(copy.deepcopy(rng.choice(insts)))
    elif choice == 4:
        mods = f["flags"].setdefault("kernel.loadedmodule", {"elements": {}})["elements"]
        if "nvidia" in mods:
            del mods["nvidia"]
        else:
            mods["nvidia"] = {}
    elif choice == 5:
        node = f["attributes"].setdefault("gpu.node", {"elements": {}})["elements"]
        node[rng.choice(["count", "cuda", "zz"])] = str(rng.randrange(3))
    elif choice == 6 and insts:
        rng.choice(insts)["attributes"]["product"] = rng.choice(["H100", "7"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_memo_output_is_a_full_evaluation(seed: int) -> None:
    rules = ruleset_from_documents([{"rules": _rules()}], strict=False)
    rng = random.Random(seed)
    feats = run_scan(fixture_root("hgx-h100")).features
    memo = RuleMemo()
    for _ in range(60):
        _mutate(rng, feats)
        want = evaluate(rules, copy.deepcopy(feats), own_ns="gpu.feature.node.kubernetes.io")
        got = evaluate(rules, feats, own_ns="gpu.feature.node.kubernetes.io", memo=memo)
        assert got.to_json() == want.to_json()


def test_memo_runs_only_the_rules_a_change_reaches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU's health changed: the rule naming it and the rules reading what it set run
    again; the others (memory, modules, gpu.node, the template that only counts the GPUs
    with a vendor) do not."""
    rules = ruleset_from_documents([{"rules": _rules()}], strict=False)
    feats = run_scan(fixture_root("hgx-h100")).features
    for inst in feats["instances"]["gpu.device"]["elements"]:
        inst["attributes"]["health"] = "ok"
    memo = RuleMemo()
    assert "example.com/sick" not in evaluate(rules, feats, memo=memo).labels
    ran: list[str] = []
    real = engine.execute_rule

    def counted(rule: Any, *a: Any, **kw: Any) -> Any:
        ran.append(rule.name)
        return real(rule, *a, **kw)

    monkeypatch.setattr(engine, "execute_rule", counted)
    evaluate(rules, feats, memo=memo)
    assert ran == []  # nothing changed: nothing runs
    feats["instances"]["gpu.device"]["elements"][0]["attributes"]["health"] = "failed"
    out = evaluate(rules, feats, memo=memo)
    # 'health' now matches and sets example.com/sick: 'seen-all' (every rule.matched
    # name) and 'taint' (that name) read it
    assert ran == ["health", "seen-all", "taint"]
    assert out.labels["example.com/sick"] == "yes" and out.taints
    assert out.to_json() == evaluate(rules, feats).to_json()


def test_rule_output_reused_while_what_the_rules_read_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent's RuleOutputs keys its last output on what the rules can read: a changed
    attribute no rule names reuses it; a named one, or an attribute feature (an ``@``
    value's source), evaluates again."""
    from nfd_gpu.scan import RuleOutputs

    rules = ruleset_from_documents([{"rules": _rules()}], strict=False)
    feats = run_scan(fixture_root("hgx-h100")).features
    calls: list[int] = []

    def counted(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return evaluate(*a, **kw)

    reuse = RuleOutputs()
    first = reuse.output(rules, feats, counted)
    pci = feats["instances"]["pci.device"]["elements"]
    pci[0]["attributes"]["subsystem_device"] = "beef"  # no rule reads it
    assert reuse.output(rules, feats, counted) is first and len(calls) == 1
    pci[0]["attributes"]["vendor"] = "1002"  # 'module' reads pci.device vendor
    out = reuse.output(rules, feats, counted)
    assert len(calls) == 2 and out.to_json() == evaluate(rules, feats).to_json()
    feats["attributes"]["gpu.node"]["elements"]["count"] = "99"  # @gpu.node.count
    out = reuse.output(rules, feats, counted)
    assert len(calls) == 3 and out.labels.get("example.com/dyn") == "99"


def test_a_changed_pass_takes_the_prints_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's RuleOutputs fingerprints the features, then evaluates on a working copy of
    them: the memo's run reuses the prints its fingerprint took (one per feature the rules
    read), and the output is a full evaluation's, over a long sequence of changes."""
    from nfd_gpu.rules import memo as memo_module
    from nfd_gpu.scan import RuleOutputs

    rules = ruleset_from_documents([{"rules": _rules()}], strict=False)
    feats = run_scan(fixture_root("hgx-h100")).features
    reuse = RuleOutputs()
    reuse.output(rules, feats, evaluate)
    prints: list[str] = []
    real = memo_module._fingerprint

    def counted(features: Features, key: str, names: Any) -> Any:
        prints.append(key)
        return real(features, key, names)

    monkeypatch.setattr(memo_module, "_fingerprint", counted)
    rng = random.Random(5)
    for _ in range(40):
        _mutate(rng, feats)
        prints.clear()
        got = reuse.output(rules, feats, evaluate)
        assert sorted(prints) == sorted(set(prints))  # each feature's prints once
        assert got.to_json() == evaluate(rules, copy.deepcopy(feats)).to_json()


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_pass_no_rule_input_moved_is_the_last_output_without_the_rules_loop(
    dynamic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU's link width changed (no rule reads it): no rule runs, the last output is
    reused whole, its filtering too unless an ``@`` value reads the features; the output is
    a full evaluation's each time, over changes that move rule inputs and ones that do not."""
    feats = run_scan(fixture_root("hgx-h100")).features
    plain = [r for r in _rules() if dynamic or "@" not in repr(r)]
    first = evaluate(ruleset_from_documents([{"rules": plain}], strict=False), feats)
    failing = {name for name, _ in first.errors}
    rules = ruleset_from_documents(
        [{"rules": [r for r in plain if r["name"] not in failing]}], strict=False
    )
    assert rules.rule_count > 5 and ("@" in repr(rules)) == dynamic
    memo = RuleMemo()
    evaluate(rules, feats, memo=memo)
    loops: list[int] = []
    real = RuleMemo._loop

    def counted(self: RuleMemo, *a: Any) -> Any:
        loops.append(1)
        return real(self, *a)

    monkeypatch.setattr(RuleMemo, "_loop", counted)
    rng = random.Random(7)
    reused = 0
    for i in range(80):
        gpu = feats["instances"]["gpu.device"]["elements"][0]["attributes"]
        gpu["pcie_width"] = str(i % 2 + 8)  # read by no rule
        if i % 3 == 0:
            _mutate(rng, feats)
        want = evaluate(rules, copy.deepcopy(feats))
        got = evaluate(rules, feats, memo=memo)
        assert got.to_json() == want.to_json()
        reused += memo.reused
        assert memo.reused or loops
        assert (memo.filtered is None) == dynamic or not memo.reused
    assert reused > 20 and len(loops) < 80 - 20
