"""Intel's and AMD's upstream NodeFeatureRules, unchanged, via `rules test`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from nfd_gpu.cli.rules import rules_app
from tests.rules.conftest import AMD_RULE, DATA, INTEL_RULES

runner = CliRunner()


def _rules_test(rules: str, features: str) -> dict[str, object]:
    res = runner.invoke(rules_app, ["test", rules, "--features", features])
    assert res.exit_code == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout)
    return out


def test_intel_rules_on_flex170_node() -> None:
    rules = INTEL_RULES
    out = _rules_test(str(rules), str(DATA / "features" / "flex170.yaml"))
    # Intended by the rule authors for a node with two Flex 170 (8086:56c0, class 0380) and
    # i915 loaded; the ASPEED BMC VGA (1a03, class 0300) must not count.
    assert out["labels"] == {
        "intel.feature.node.kubernetes.io/gpu": "true",
        "gpu.intel.com/device-id.0380-56c0.present": "true",
        "gpu.intel.com/device-id.0380-56c0.count": "2",
        "gpu.intel.com/device.count": "2",
        "gpu.intel.com/family": "Flex_Series",
        "gpu.intel.com/product": "Flex_170",
    }
    assert out["errors"] == []
    assert out["extendedResources"] == {}


def test_intel_gpu_rule_needs_a_driver_module(tmp_path: Path) -> None:
    rules = INTEL_RULES
    text = (DATA / "features" / "flex170.yaml").read_text().replace("i915: {}", "video: {}")
    path = tmp_path / "flex170-no-i915.yaml"
    path.write_text(text)
    out = _rules_test(str(rules), str(path))
    labels = out["labels"]
    assert isinstance(labels, dict)
    assert "intel.feature.node.kubernetes.io/gpu" not in labels
    assert labels["gpu.intel.com/product"] == "Flex_170"  # platform labels need no driver


def test_amd_rules_on_mi210_node() -> None:
    out = _rules_test(str(AMD_RULE), str(DATA / "features" / "mi210.yaml"))
    assert out["labels"] == {
        "feature.node.kubernetes.io/amd-gpu": "true",
        "feature.node.kubernetes.io/amd-gpu-mi210": "true",
    }
    assert out["errors"] == []


def test_amd_rules_on_intel_node_give_nothing() -> None:
    out = _rules_test(str(AMD_RULE), str(DATA / "features" / "flex170.yaml"))
    assert out["labels"] == {}


def test_labels_format() -> None:
    res = runner.invoke(
        rules_app,
        [
            "test",
            str(AMD_RULE),
            "--features",
            str(DATA / "features" / "mi210.yaml"),
            "--format",
            "labels",
        ],
    )
    assert res.exit_code == 0
    assert res.stdout.splitlines() == [
        "feature.node.kubernetes.io/amd-gpu=true",
        "feature.node.kubernetes.io/amd-gpu-mi210=true",
    ]
