"""The NodeFeatureRules shipped in rules/, checked and evaluated on fixtures."""

from __future__ import annotations

import pytest

from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.rules.features_doc import read_features_file
from tests.rules.conftest import DATA, REPO

G = "gpu.feature.node.kubernetes.io/"
EXPECTED = {
    "h100.yaml": {G + "class": "large", G + "mig-ready": "true"},
    "t4.yaml": {G + "class": "small"},
    "mi300x.yaml": {
        G + "class": "large",
        G + "amd.instinct-cdna3": "true",
        G + "amd.instinct-cdna3.count": "2",
    },
    "mi210.yaml": {},
    "flex170.yaml": {
        G + "intel.datacenter": "true",
        G + "intel.datacenter.series": "flex",
        G + "intel.datacenter.count": "2",
    },
}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_shipped_rules_on_fixture(fixture: str) -> None:
    rules = load_rules(REPO / "rules")
    assert rules.rule_count >= 7
    out = evaluate(rules, read_features_file(DATA / "features" / fixture))
    assert out.errors == []
    assert out.labels == EXPECTED[fixture]


def test_mig_active_uses_rule_matched() -> None:
    feats = read_features_file(DATA / "features" / "h100.yaml")
    feats["attributes"]["gpu.node"]["elements"]["mig.enabled"] = "true"
    out = evaluate(load_rules(REPO / "rules"), feats)
    assert out.labels[G + "mig-active"] == "true"
    assert out.vars == {"gpu.class.large": "true"}
