"""NVML present but not starting vs NVML absent, in the nvidia profile (docs/nvidia.md "When
NVML is there but does not start"): GFD writes no label when ``nvmlInit`` fails; without
libnvidia-ml in the pod nfd-gpu labels driver-bound GPUs from procfs/PCI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nfd_gpu.labels.nvidia import NvidiaOptions
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root


def _root(tmp_path: Path, error: str) -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-mig-single"), root, symlinks=True)
    rec = json.loads((root / "nvml.json").read_text())
    (root / "nvml.json").write_text(json.dumps({**rec, "nvmlInit": {"error": error}}))
    return root


@pytest.mark.parametrize("error", ["DriverNotLoaded", "LibRmVersionMismatch"])
def test_init_failure_gives_no_nvidia_label(tmp_path: Path, error: str) -> None:
    res = run_scan(_root(tmp_path, error), profiles=["neutral", "nvidia"])
    assert not [k for k in res.labels if k.startswith("nvidia.com/")]
    assert any("nvmlInit failed" in w for w in res.warnings)
    # the neutral profile still counts the GPUs (procfs/PCI)
    assert res.labels["gpu.feature.node.kubernetes.io/nvidia.count"] == "2"
    gpu = next(g for g in res.snapshot.gpus if g.vendor == "nvidia")
    assert gpu.nvidia.nvml_init_error  # why, as NVML says it


def test_fail_on_init_error_false_writes_timestamp(tmp_path: Path) -> None:
    opts = NvidiaOptions(timestamp=1767225600, fail_on_init_error=False)
    res = run_scan(_root(tmp_path, "DriverNotLoaded"), profiles=["nvidia"], nvidia_options=opts)
    assert res.labels == {"nvidia.com/gfd.timestamp": "1767225600"}


def test_library_not_found_is_no_nvml(tmp_path: Path) -> None:
    # pynvml there, libnvidia-ml.so not: as without NVML, procfs/PCI facts label the GPUs
    res = run_scan(_root(tmp_path, "LibraryNotFound"), profiles=["nvidia"])
    assert res.labels["nvidia.com/gpu.count"] == "2"
    assert all(g.nvidia.nvml_init_error is None for g in res.snapshot.gpus)
