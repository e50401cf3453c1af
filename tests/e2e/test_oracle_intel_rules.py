"""The intel profile against Intel's own NodeFeatureRules evaluated by NFD's own code.

tests/rules/test_intel_rules.py runs Intel's rules (tests/data/intel/, from Intel's
deployments/nfd) with nfd-gpu's engine; here nfd-oracle (NFD v0.19.0's
nodefeaturerule code, nfd-master's rule order) evaluates them on each fixture's
features, so the profile is judged by the engine Intel's users run.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, TESTS, fixture_root
from tests.e2e.oracle import oracle_batch

RULE_FILES = ("platform-labeling-rules.yaml", "node-feature-rules.yaml")
# Keys Intel's rules write; memory.max / tiles come from Intel's labeler binary instead.
RULE_KEYS = ("gpu.intel.com/device", "gpu.intel.com/product", "gpu.intel.com/family")
GPU_LABEL = "intel.feature.node.kubernetes.io/gpu"


def _rule_docs() -> list[Any]:
    docs: list[Any] = []
    for name in RULE_FILES:
        with (TESTS / "data" / "intel" / name).open(encoding="utf-8") as f:
            docs.extend(d for d in yaml.safe_load_all(f) if d)
    return docs


def _intel(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(RULE_KEYS) or k == GPU_LABEL}


@pytest.fixture(scope="module")
def nfd_answers() -> dict[str, dict[str, str]]:
    """One oracle batch: Intel's rules on every fixture's features (as nfd-master sees
    them: nfd-worker's pci.device / kernel.* plus nfd-gpu's own)."""
    docs = _rule_docs()
    cases = []
    for name in ALL_FIXTURES:
        feats = run_scan(fixture_root(name), profiles=("intel",)).features
        cases.append({"rules": docs, "features": {"spec": {"features": feats}}})
    answers = oracle_batch(cases)
    out = {}
    for name, ans in zip(ALL_FIXTURES, answers, strict=True):
        assert "error" not in ans, (name, ans)
        assert ans["result"]["errors"] == [], (name, ans["result"]["errors"])
        out[name] = _intel(ans["result"]["labels"])
    return out


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_profile_matches_intels_rules_under_nfd(
    name: str, nfd_answers: dict[str, dict[str, str]]
) -> None:
    ours = _intel(run_scan(fixture_root(name), profiles=("intel",)).labels)
    assert ours == nfd_answers[name]


def test_nfd_sees_intel_gpus_where_the_fixtures_have_them(
    nfd_answers: dict[str, dict[str, str]],
) -> None:
    """Not vacuous: NFD's engine labels the Intel fixtures (VFs counted on the Flex host)."""
    assert nfd_answers["flex170-sriov"]["gpu.intel.com/device.count"] == "9"
    for name in ("arc-a770", "max1550-xe", "talos-arc-xe"):
        assert nfd_answers[name][GPU_LABEL] == "true", name
    assert nfd_answers["hgx-h100"] == {}
