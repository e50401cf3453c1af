"""The ``nvidia`` profile against GFD's expected-output regexes (v0.20.0's tests/ files; the
GFD code that judges the profile, tests/e2e/test_gfd_judge.py, is v0.19.0's)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from nfd_gpu.labels.nvidia import NvidiaOptions, gfd_sanitise
from nfd_gpu.scan import run_scan
from tests.conftest import DATA, fixture_root

REF = DATA / "nvidia"
# gfd.timestamp is opt-in (NvidiaOptions.timestamp, --gfd-timestamp): on for this check.
GFD_OPTS = NvidiaOptions(timestamp=1767225600)

# GFD's main_test.go checks vgpu.* lines only against the -vgpu file; the vGPU guest
# fixture carries the vGPU PCI capability (host driver 550.54.16 / r550_40).
# GFD's files come from runs with --mig-strategy none / single / mixed (main_test.go).
CASES = [
    ("k8s-device-plugin_v0.20.0__tests__expected-output.txt", "a100-t4", "none"),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-mig-none.txt", "h100-mig-single", "none"),
    (
        "k8s-device-plugin_v0.20.0__tests__expected-output-mig-single.txt",
        "h100-mig-single",
        "single",
    ),
    (
        "k8s-device-plugin_v0.20.0__tests__expected-output-mig-mixed.txt",
        "dgx-a100-mig-mixed",
        "mixed",
    ),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-vgpu.txt", "nvidia-vgpu-guest", "none"),
]


@pytest.mark.parametrize(("expected", "fixture", "strategy"), CASES)
def test_every_gfd_line_is_matched(expected: str, fixture: str, strategy: str) -> None:
    path = REF / expected
    opts = dataclasses.replace(GFD_OPTS, mig_strategy=strategy)
    labels = run_scan(fixture_root(fixture), profiles=["nvidia"], nvidia_options=opts).labels
    lines = [f"{k}={v}" for k, v in labels.items()]
    missing = []
    regexes = [r for r in path.read_text().splitlines() if r.strip()]
    assert regexes
    for regex in regexes:
        if not any(re.match(regex, line) for line in lines):
            missing.append(regex)
    assert missing == []


def test_timestamp_is_opt_in() -> None:
    root = fixture_root("a100-t4")
    on = run_scan(root, profiles=["nvidia"], nvidia_options=GFD_OPTS).labels
    assert re.fullmatch(r"[0-9]{10}", on["nvidia.com/gfd.timestamp"])
    assert "nvidia.com/gfd.timestamp" not in run_scan(root, profiles=["nvidia"]).labels


def test_vgpu_guest_labels() -> None:
    labels = run_scan(fixture_root("nvidia-vgpu-guest"), profiles=["nvidia"]).labels
    assert labels["nvidia.com/vgpu.present"] == "true"
    assert labels["nvidia.com/vgpu.host-driver-version"] == "550.54.16"
    assert labels["nvidia.com/vgpu.host-driver-branch"] == "r550_40"
    # no config space in the other fixtures: nothing known, nothing claimed
    other = run_scan(fixture_root("a100-t4"), profiles=["nvidia"]).labels
    assert not any(k.startswith("nvidia.com/vgpu.") for k in other)


def test_gfd_sanitise() -> None:
    assert gfd_sanitise("Tesla T4") == "Tesla-T4"
    assert gfd_sanitise("NVIDIA TITAN X (Pascal)") == "NVIDIA-TITAN-X-Pascal"


def test_gfd_writes_nothing_without_nvml() -> None:
    # no driver, a vfio-only host, a lost GPU: GFD exits or fails its pass
    for name in ("h100-no-driver", "passthrough-host", "h100-gpu-lost"):
        result = run_scan(fixture_root(name), profiles=["nvidia"])
        assert result.labels == {}, name
        assert any("no nvidia.com labels" in w for w in result.warnings), name


def test_mixed_models_product_is_deterministic() -> None:
    labels = run_scan(fixture_root("a100-t4"), profiles=["nvidia"]).labels
    # tie (1 + 1): the first name in sorted order
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/gpu.count"] == "1"


def test_default_strategy_is_gfds_none() -> None:
    labels = run_scan(fixture_root("h100-mig-single"), profiles=["nvidia"]).labels
    assert "nvidia.com/mig.strategy" not in labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.replicas"] == "0"


def test_strategies() -> None:
    auto = NvidiaOptions(mig_strategy="auto")
    single = run_scan(
        fixture_root("h100-mig-single"), profiles=["nvidia"], nvidia_options=auto
    ).labels
    assert single["nvidia.com/mig.strategy"] == "single"
    assert single["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert single["nvidia.com/gpu.count"] == "14"
    mixed = run_scan(
        fixture_root("dgx-a100-mig-mixed"), profiles=["nvidia"], nvidia_options=auto
    ).labels
    assert mixed["nvidia.com/mig.strategy"] == "mixed"
    assert mixed["nvidia.com/mig-1g.5gb.me.count"] == "1"
    assert mixed["nvidia.com/gpu.count"] == "8"
    none = run_scan(fixture_root("hgx-h100"), profiles=["nvidia"], nvidia_options=auto).labels
    assert "nvidia.com/mig.strategy" not in none


def test_full_gpu_model_wins_over_mig_enabled(tmp_path: Path) -> None:
    # GFD newGPULabelers writes the MIG-enabled models first, full GPUs last: with the A100
    # in MIG mode (no MIG devices yet) a100-t4 is labelled Tesla-T4 under every strategy.
    root = tmp_path / "root"
    shutil.copytree(fixture_root("a100-t4"), root, symlinks=True)
    rec = json.loads((root / "nvml.json").read_text())
    a100 = next(d for d in rec["devices"] if "A100" in d["nvmlDeviceGetName"])
    a100["nvmlDeviceGetMigMode"] = [1, 1]
    (root / "nvml.json").write_text(json.dumps(rec))
    for strategy in ("none", "mixed"):
        opts = NvidiaOptions(mig_strategy=strategy)
        labels = run_scan(root, profiles=["nvidia"], nvidia_options=opts).labels
        assert labels["nvidia.com/gpu.product"] == "Tesla-T4"
        assert labels["nvidia.com/gpu.count"] == "1"
        assert labels["nvidia.com/gpu.memory"] == "15360"
        assert labels["nvidia.com/gpu.family"] == "turing"
        assert labels["nvidia.com/gpu.replicas"] == "1"
