"""Rules inside a scan: strict for the CLI, tolerant for the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from nfd_gpu.rules import RuleError
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

GOOD = """apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: good}
spec:
  rules:
    - name: hopper
      labels: {example.com/hopper: "true", gpu.feature.node.kubernetes.io/family: overridden}
      matchFeatures:
        - feature: gpu.node
          matchExpressions: {family: {op: In, value: [hopper]}}
"""
BAD = """apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: bad}
spec:
  rules:
    - name: broken
      labels: {example.com/x: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions: {family: {op: Bogus, value: [x]}}
"""


def write_rules(d: Path) -> Path:
    d.mkdir()
    (d / "a-good.yaml").write_text(GOOD)
    (d / "b-bad.yaml").write_text(BAD)
    return d


def test_strict_rules_raise(tmp_path: Path) -> None:
    with pytest.raises(RuleError) as e:
        run_scan(fixture_root("hgx-h100"), rules_path=write_rules(tmp_path / "r"))
    assert "b-bad.yaml" in str(e.value) and "Bogus" in str(e.value)


def test_tolerant_rules_apply_the_valid_ones(tmp_path: Path) -> None:
    r = run_scan(
        fixture_root("hgx-h100"), rules_path=write_rules(tmp_path / "r"), tolerant_rules=True
    )
    assert r.labels["example.com/hopper"] == "true"
    # Rule labels override built-in ones, as in nfd-master.
    assert r.labels["gpu.feature.node.kubernetes.io/family"] == "overridden"
    assert "example.com/x" not in r.labels
    assert any("b-bad.yaml" in w for w in r.warnings)
    assert r.rule_errors and r.rule_errors[0][0] == "load"


def test_rules_do_not_match_other_fixture(tmp_path: Path) -> None:
    r = run_scan(
        fixture_root("mi210-8x"), rules_path=write_rules(tmp_path / "r"), tolerant_rules=True
    )
    assert "example.com/hopper" not in r.labels
