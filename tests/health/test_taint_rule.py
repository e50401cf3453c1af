"""rules/gpu-health.yaml on the fixtures (``nfd-gpu rules test`` semantics): the node is
tainted when no GPU is left to use (every GPU failed) or a GPU fell off the bus; one failed
GPU among healthy ones, degraded or healthy nodes, and a node with a GPU that has no driver
bound yet are not. The variants in docs/health.md do what they say."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from nfd_gpu.health import HealthTracker
from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root

TAINT = {
    "key": "gpu.feature.node.kubernetes.io/unhealthy",
    "value": "failed",
    "effect": "NoSchedule",
}
ONE_FAILED = ["h100-ecc-uncorrectable", "h100-remap-pending", "h100-remap-failure",
              "h100-aer-fatal", "mi210-ras-ue", "h100-gpu-lost"]  # fmt: skip
NOT_FAILED = ["h100-thermal-slowdown", "h100-nvlink-down", "h100-xid-79", "hgx-h100", "mi210-8x"]
FATAL = "Undefined 0\nSDES 1\nTOTAL_ERR_FATAL 1\n"


def _taints(root: Path, rules: Path = REPO / "rules" / "gpu-health.yaml", **kw: Any) -> list:
    out = evaluate(load_rules(rules), run_scan(root, **kw).features)
    assert out.labels == {}
    return list(out.taints)


@pytest.mark.parametrize("name", ONE_FAILED + NOT_FAILED)
def test_one_failed_gpu_among_healthy_ones_does_not_taint_the_node(name: str) -> None:
    """On main one failed GPU of eight tainted the whole node, CPU-only pods included."""
    assert _taints(fixture_root(name)) == []


def _all_fatal(tmp_path: Path, fixture: str) -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root(fixture), root, symlinks=True)
    for bdf in ("0000:18:00.0", "0000:2a:00.0"):
        (root / f"sys/devices/pci0000:{bdf[5:7]}/{bdf}/aer_dev_fatal").write_text(FATAL)
    return root


def test_every_gpu_failed_taints_the_node(tmp_path: Path) -> None:
    assert _taints(_all_fatal(tmp_path, "h100-aer-fatal")) == [TAINT]
    assert _taints(fixture_root("h100-remap-pending-all")) == [TAINT]


def test_a_gpu_off_the_bus_taints_the_node(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    tracker = HealthTracker()
    assert _taints(root, health=tracker) == []
    (root / "sys/bus/pci/devices/0000:18:00.0").unlink()  # fell off the bus
    assert _taints(root, health=tracker) == [TAINT]


def test_a_gpu_without_driver_never_taints(tmp_path: Path) -> None:
    """The GPU operator's driver pods must still reach a node that has no driver yet,
    even when its GPUs show fatal PCIe errors (on main: tainted)."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-no-driver"), root, symlinks=True)
    for bdf in ("0000:18:00.0", "0000:2a:00.0"):
        (root / f"sys/devices/pci0000:{bdf[5:7]}/{bdf}/aer_dev_fatal").write_text(FATAL)
    labels = run_scan(root).labels
    assert labels["gpu.feature.node.kubernetes.io/health"] == "failed"
    assert labels["gpu.feature.node.kubernetes.io/health.no-driver.count"] == "2"
    assert _taints(root) == []


def _variants() -> dict[str, str]:
    """The rule variants of docs/health.md: each ```yaml block headed ``# variant: NAME``."""
    doc = (REPO / "docs" / "health.md").read_text()
    blocks = re.findall(r"```yaml\n# variant: (\S+)\n(.*?)```", doc, re.S)
    return dict(blocks)


def test_documented_variants(tmp_path: Path) -> None:
    variants = _variants()
    assert set(variants) == {"any-gpu-failed", "node-level-only"}
    paths = {}
    for name, text in variants.items():
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text)
        assert yaml.safe_load(text)["kind"] == "NodeFeatureRule"
    # any GPU failed: the old default, one failed GPU of two taints
    for name in ONE_FAILED[:-1]:
        assert _taints(fixture_root(name), paths["any-gpu-failed"]) == [TAINT], name
    for name in NOT_FAILED:
        assert _taints(fixture_root(name), paths["any-gpu-failed"]) == [], name
    # node-level only: a GPU lost, not every GPU failed
    assert _taints(_all_fatal(tmp_path, "h100-aer-fatal"), paths["node-level-only"]) == []
