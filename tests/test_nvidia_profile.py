"""The ``nvidia`` profile against GFD v0.20.0's expected-output regexes."""

from __future__ import annotations

import re

import pytest

from nfd_gpu.labels.nvidia import NvidiaOptions, gfd_sanitise
from nfd_gpu.scan import run_scan
from tests.conftest import SHARED, fixture_root

REF = SHARED / "reference" / "nvidia"
# gfd.timestamp is opt-in (NvidiaOptions.timestamp, --gfd-timestamp): on for this check.
GFD_OPTS = NvidiaOptions(timestamp=1767225600)

# GFD's main_test.go checks vgpu.* lines only against the -vgpu file; the vGPU guest
# fixture carries the vGPU PCI capability (host driver 550.54.16 / r550_40).
CASES = [
    ("k8s-device-plugin_v0.20.0__tests__expected-output.txt", "a100-t4"),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-mig-none.txt", "h100-gpu-lost"),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-mig-single.txt", "h100-mig-single"),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-mig-mixed.txt", "dgx-a100-mig-mixed"),
    ("k8s-device-plugin_v0.20.0__tests__expected-output-vgpu.txt", "nvidia-vgpu-guest"),
]


@pytest.mark.parametrize(("expected", "fixture"), CASES)
def test_every_gfd_line_is_matched(expected: str, fixture: str) -> None:
    path = REF / expected
    if not path.exists():
        pytest.skip(f"{path} not present")
    labels = run_scan(fixture_root(fixture), profiles=["nvidia"], nvidia_options=GFD_OPTS).labels
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


def test_mixed_models_product_is_deterministic() -> None:
    labels = run_scan(fixture_root("a100-t4"), profiles=["nvidia"]).labels
    # tie (1 + 1): the first name in sorted order
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/gpu.count"] == "1"


def test_strategies() -> None:
    single = run_scan(fixture_root("h100-mig-single"), profiles=["nvidia"]).labels
    assert single["nvidia.com/mig.strategy"] == "single"
    assert single["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert single["nvidia.com/gpu.count"] == "14"
    mixed = run_scan(fixture_root("dgx-a100-mig-mixed"), profiles=["nvidia"]).labels
    assert mixed["nvidia.com/mig.strategy"] == "mixed"
    assert mixed["nvidia.com/mig-1g.5gb.me.count"] == "1"
    assert mixed["nvidia.com/gpu.count"] == "8"
    none = run_scan(fixture_root("h100-gpu-lost"), profiles=["nvidia"]).labels
    assert "nvidia.com/mig.strategy" not in none
