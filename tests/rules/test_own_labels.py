"""nfd-gpu's own labels (its health and counts under gpu.feature.node.kubernetes.io/) are
not for custom rules: ``rules check`` refuses a rule writing one, and at run time a
template that writes one is dropped with the rule named. On main a rule could write
``health=ok`` over a failed GPU and ``rules check`` said OK."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nfd_gpu.cli.rules import rules_app
from nfd_gpu.labels.neutral import LABEL_TABLE
from nfd_gpu.rules.validate import OWN_KEYS, OWN_NS, ValidationError, check_not_own
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root

G = "gpu.feature.node.kubernetes.io"
RULE = """apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {{name: own}}
spec:
  rules:
    - name: {name}
{body}      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            count: {{op: Exists}}
"""


def _rule(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(RULE.format(name=name, body=body))
    return p


def test_own_keys_are_the_neutral_health_and_count_keys() -> None:
    neutral = {d.key for d in LABEL_TABLE if d.key.startswith("health") or "count" in d.key}
    assert {k for k in neutral if not k.startswith("health.")} | {"health.<state>"} == set(OWN_KEYS)
    for key in neutral:
        sample = re.sub(r"<[^>]+>", "x", key)
        with pytest.raises(ValidationError):
            check_not_own(f"{OWN_NS}/{sample}")
    check_not_own(f"{OWN_NS}/intel.datacenter.count")  # a shipped rule's own count
    check_not_own(f"{OWN_NS}/class")
    check_not_own("example.com/health")


@pytest.mark.parametrize(
    "label",
    [
        f"{G}/health: ok",
        f"{G}/health.failed.count: '0'",
        f"{G}/count: '9'",
        f"{G}/nvidia.count: '1'",
    ],
)
def test_rules_check_refuses_an_own_label(tmp_path: Path, label: str) -> None:
    path = _rule(tmp_path, "hide-failure", f"      labels:\n        {label}\n")
    res = CliRunner().invoke(rules_app, ["check", str(path)])
    assert res.exit_code == 2, res.output
    assert "hide-failure" in res.output and "nfd-gpu's own" in res.output


def test_a_template_writing_an_own_label_is_dropped_at_run_time(tmp_path: Path) -> None:
    body = (
        "      labelsTemplate: |\n"
        f"        {G}/health=ok\n"
        f"        {G}/tier=gold\n"
    )  # fmt: skip
    path = _rule(tmp_path, "template-hides", body)
    res = run_scan(fixture_root("h100-remap-pending"), rules_path=path)
    assert res.labels[f"{G}/health"] == "failed"  # the rule did not replace it
    assert res.labels[f"{G}/tier"] == "gold"  # the rest of the rule applies
    assert any(rule == "template-hides" and "nfd-gpu's own" in msg for rule, msg in res.rule_errors)
    # rules test shows the same
    res2 = CliRunner().invoke(
        rules_app, ["test", str(path), "--root", str(fixture_root("h100-remap-pending"))]
    )
    assert f'"{G}/health"' not in res2.stdout


def test_shipped_rules_write_no_own_label() -> None:
    res = CliRunner().invoke(rules_app, ["check", str(REPO / "rules")])
    assert res.exit_code == 0, res.output
