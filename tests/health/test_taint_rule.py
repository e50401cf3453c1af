"""rules/gpu-health.yaml on the fixtures (``nfd-gpu rules test`` semantics): the taint on
every node with a failed GPU, none on degraded or healthy ones."""

from __future__ import annotations

import pytest

from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root

TAINT = {
    "key": "gpu.feature.node.kubernetes.io/unhealthy",
    "value": "failed",
    "effect": "NoSchedule",
}
FAILED = ["h100-ecc-uncorrectable", "h100-remap-pending", "h100-remap-failure",
          "h100-aer-fatal", "mi210-ras-ue", "h100-gpu-lost"]  # fmt: skip
NOT_FAILED = ["h100-thermal-slowdown", "h100-nvlink-down", "h100-xid-79", "hgx-h100", "mi210-8x"]


@pytest.mark.parametrize("name", FAILED + NOT_FAILED)
def test_taint_exactly_on_failed(name: str) -> None:
    out = evaluate(
        load_rules(REPO / "rules" / "gpu-health.yaml"), run_scan(fixture_root(name)).features
    )
    assert list(out.taints) == ([TAINT] if name in FAILED else [])
    assert out.labels == {}
