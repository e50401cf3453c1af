"""Each health failure fixture gives the documented labels and ``gpu.device``
attributes in both outputs: the feature file (read back as nfd-worker's local source reads
it) and the NodeFeature object (as the sink builds it)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from nfd_gpu.scan import run_scan
from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.featurefile import FeatureFileSink
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.conftest import fixture_root
from tests.sinks.nfd_local_parser import parse_features_dir

G = "gpu.feature.node.kubernetes.io"
H1, H2 = "0000:18:00.0", "0000:2a:00.0"

# fixture -> (G/health, failed count, degraded count, {GPU address: health.reasons})
CASES: dict[str, tuple[str, int, int, dict[str, str]]] = {
    "h100-ecc-uncorrectable": ("failed", 1, 0, {H2: "ecc-uncorrectable"}),
    "h100-remap-pending": ("failed", 1, 0, {H2: "row-remap-pending"}),
    "h100-remap-pending-all": ("failed", 2, 0, {H1: "row-remap-pending", H2: "row-remap-pending"}),
    "h100-remap-failure": ("failed", 1, 0, {H2: "row-remap-failure"}),
    "h100-thermal-slowdown": ("degraded", 0, 1, {H2: "clock-hw-slowdown.clock-hw-thermal"}),
    "h100-nvlink-down": ("degraded", 0, 1, {H2: "nvlink-down"}),
    "h100-aer-fatal": ("failed", 1, 0, {H1: "aer-fatal"}),  # 3 correctable: under threshold
    "mi210-ras-ue": ("failed", 1, 0, {"0000:03:00.0": "ecc-uncorrectable.vram-bad-pages-pending"}),
    "h100-gpu-lost": ("failed", 1, 0, {H2: "not-answering"}),
    # real listings (tests/fixtures/specs/real_health.py): what a one-off scan reads of them
    "real-rtx3090-rminit": ("failed", 1, 0, {"0000:98:00.0": "not-answering"}),
    "real-rtx5090-rminit": ("failed", 1, 0, {"0000:01:00.0": "not-answering"}),
    "real-titanv-rminit": ("failed", 1, 0, {"0000:81:00.0": "not-answering"}),
    "real-rtx5080-xid79": ("ok", 0, 0, {}),  # the XIDs: the watcher's (tests/e2e)
    "real-k40m-aer-xid79": ("failed", 1, 0, {"0000:02:00.0": "aer-fatal-port"}),
    "real-a100-xid94": ("ok", 0, 0, {}),  # the XIDs: the watcher's (tests/e2e)
}


def _outputs(
    name: str, tmp_path: Path
) -> tuple[dict[str, str], list[dict[str, str]], dict[str, str]]:
    """(feature-file labels, NodeFeature gpu.device attributes, NodeFeature labels)."""
    res = run_scan(fixture_root(name))
    pub = Publication(res.labels, res.features)
    FeatureFileSink(str(tmp_path), raw_features=True).publish(pub)
    labels, _ = parse_features_dir(str(tmp_path), dt.datetime.now(dt.timezone.utc))
    obj = NodeFeatureSink(node_name="n", namespace="nfd-gpu", owner_refs=()).desired(pub)
    devices = obj["spec"]["features"]["instances"]["gpu.device"]["elements"]
    return labels, [d["attributes"] for d in devices], obj["spec"]["labels"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_failure_fixture_outputs(name: str, tmp_path: Path) -> None:
    state, failed, degraded, reasons = CASES[name]
    file_labels, devices, object_labels = _outputs(name, tmp_path)
    for labels in (file_labels, object_labels):
        assert labels[f"{G}/health"] == state
        assert labels.get(f"{G}/health.failed.count") == (str(failed) if failed else None)
        assert labels.get(f"{G}/health.degraded.count") == (str(degraded) if degraded else None)
    for d in devices:
        want = reasons.get(d["address"])
        assert d.get("health.reasons") == want, d["address"]
        assert d["health"] == ("ok" if want is None else d["health"])
        if want is not None:
            assert d["health"] in ("failed", "degraded")


def test_healthy_and_failed_differ_only_in_health(tmp_path: Path) -> None:
    """Identity labels never change because of health: the same node healthy and failing."""
    sick = run_scan(fixture_root("h100-remap-pending")).labels
    well = run_scan(fixture_root("h100-xid-79")).labels  # same node, no fault a scan reads
    differ = {k for k in set(sick) | set(well) if sick.get(k) != well.get(k)}
    assert differ == {f"{G}/health", f"{G}/health.failed.count"}


def test_signals_read_are_in_the_json() -> None:
    g = run_scan(fixture_root("h100-ecc-uncorrectable")).snapshot.gpus[0]
    assert g.health.signals == (
        "nvml.clock-events", "nvml.device", "nvml.ecc", "nvml.nvlink", "nvml.retired-pages",
        "nvml.row-remap", "sysfs.pcie-link",
    )  # fmt: skip
    assert g.health.state == "ok"


def test_no_signal_is_unknown_and_no_label() -> None:
    """A VF guest whose GPU shows no link, no AER, no NVML: every GPU unknown, no label."""
    res = run_scan(fixture_root("mi300x-vf-guest"))
    assert res.snapshot.gpus and all(g.health.state == "unknown" for g in res.snapshot.gpus)
    assert not any(k.startswith(f"{G}/health") for k in res.labels)
    elements = res.features["instances"]["gpu.device"]["elements"]
    assert all(e["attributes"]["health"] == "unknown" for e in elements)
