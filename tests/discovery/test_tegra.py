"""Jetson hosts (tests/fixtures/specs/tegra.py, each from a public listing) get the neutral
labels the listing proves; the integrated GPU is found from the device tree, its platform
device, the L4T release, CUDA's answers and MemTotal (nfd_gpu/discovery/nvidia/tegra.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nfd_gpu.discovery.nvidia import tegra
from nfd_gpu.host import HostRoot
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"
COMMON = {"present": "true", "count": "1", "vendor": "nvidia", "integrated": "true"}


def labels(root: Path) -> dict[str, str]:
    got = run_scan(root).labels
    return {k.removeprefix(f"{G}/"): v for k, v in got.items()}


@pytest.mark.parametrize(
    ("fixture", "want"),
    [
        # deviceQuery: "NVIDIA Tegra X1", 10.0, 5.3, 4155834368 bytes (3963 MiB rounded down)
        ("real-jetson-nano", {"product": "NVIDIA-Tegra-X1", "family": "maxwell",
         "compute.major": "5", "compute.minor": "3", "memory-mib": "3963",
         "nvidia.cuda.major": "10", "nvidia.cuda.minor": "0"}),
        # deviceQuery: "Xavier", 11.8, 7.2, 32509100032 bytes
        ("real-jetson-xavier", {"product": "Xavier", "family": "volta", "compute.major": "7",
         "compute.minor": "2", "memory-mib": "31003", "nvidia.cuda.major": "11",
         "nvidia.cuda.minor": "8"}),
        # deviceQuery: "Orin", 12.9, 8.7, 57454317568 bytes
        ("real-jetson-orin-jp6", {"product": "Orin", "family": "ampere", "compute.major": "8",
         "compute.minor": "7", "memory-mib": "54792", "nvidia.cuda.major": "12",
         "nvidia.cuda.minor": "9"}),
        # jtop: R39 REVISION 2.0, tegra234 (CUDA's CC page: Jetson AGX Orin 8.7)
        ("real-jetson-orin-jp7", {"product": "Orin", "family": "ampere", "compute.major": "8",
         "compute.minor": "7", "nvidia.l4t.version": "39.2.0", "nvidia.l4t.major": "39"}),
        # jtop: R38 REVISION 2.0, tegra264 (CUDA's CC page: Jetson T5000 11.0, Blackwell)
        ("real-jetson-thor", {"product": "NVIDIA-Thor", "family": "blackwell",
         "compute.major": "11", "compute.minor": "0", "nvidia.l4t.version": "38.2.0",
         "nvidia.l4t.major": "38"}),
    ],
)  # fmt: skip
def test_jetson_labels_are_the_listing(fixture: str, want: dict[str, str]) -> None:
    got = labels(fixture_root(fixture))
    assert {k: got.get(k) for k in {**COMMON, **want}} == {**COMMON, **want}
    # what the listing does not show is not labelled
    if "nvidia.cuda.major" not in want:
        assert "nvidia.cuda.major" not in got and "memory-mib" not in got
    if "nvidia.l4t.version" not in want:
        assert "nvidia.l4t.version" not in got
    assert "nvidia.driver.version" not in got  # no listing shows the driver


def _jetson(tmp_path: Path, base: str = "real-jetson-orin-jp7") -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root(base), root, symlinks=True)
    return root


def test_platform_device_bound_to_nvgpu(tmp_path: Path) -> None:
    """L4T's nvgpu driver: the platform device is the GPU's address and driver, and the
    L4T release is nvgpu's version (it has none of its own)."""
    root = _jetson(tmp_path)
    dev = root / "sys/devices/platform/bus@0/17000000.gpu"
    dev.mkdir(parents=True)
    drv = root / "sys/bus/platform/drivers/nvgpu"
    drv.mkdir(parents=True)
    (drv / "17000000.gpu").symlink_to("../../../../devices/platform/bus@0/17000000.gpu")
    (drv / "uevent").write_text("")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/meminfo").write_text("MemTotal:       62840532 kB\nMemFree: 1 kB\n")
    scan = run_scan(root)
    (gpu,) = scan.snapshot.gpus
    assert (gpu.address, gpu.driver, gpu.mode, gpu.memory_mib) == (
        "17000000.gpu", "nvgpu", "container", 62840532 // 1024)  # fmt: skip
    got = {k.removeprefix(f"{G}/"): v for k, v in scan.labels.items()}
    assert (got["driver"], got["nvidia.driver.version"], got["mode"]) == (
        "nvgpu", "39.2.0", "container")  # fmt: skip


def test_no_tegra_compatible_no_gpu(tmp_path: Path) -> None:
    root = _jetson(tmp_path)
    (root / "proc/device-tree").mkdir(parents=True)  # over the sys/firmware one
    (root / "proc/device-tree/compatible").write_text("raspberrypi,4-model-b\0brcm,bcm2711\0")
    assert run_scan(root).snapshot.gpus == ()


def test_unknown_soc_is_a_warning(tmp_path: Path) -> None:
    root = _jetson(tmp_path)
    (root / "proc/device-tree").mkdir(parents=True)  # over the sys/firmware one
    (root / "proc/device-tree/compatible").write_text("nvidia,p9999\0nvidia,tegra999\0")
    scan = run_scan(root)
    assert scan.snapshot.gpus == ()
    assert any("tegra999" in w for w in scan.snapshot.warnings)


def test_bad_cuda_recording_is_a_warning_and_the_table_answers(tmp_path: Path) -> None:
    root = _jetson(tmp_path, "real-jetson-xavier")
    (root / "cuda.json").write_text("[1, 2]")
    scan = run_scan(root)
    (gpu,) = scan.snapshot.gpus
    assert (gpu.product, gpu.nvidia.compute_major, gpu.memory_mib) == ("Xavier", 7, 31003)
    assert gpu.provenance["product"] == "table" and gpu.provenance["memory_mib"] == "meminfo"
    assert any("cuda.json" in w for w in scan.snapshot.warnings)


def test_cuda_error_answers_nothing(tmp_path: Path) -> None:
    """cuInit failing (no GPU driver loaded): the table's facts, no CUDA version."""
    root = _jetson(tmp_path, "real-jetson-nano")
    rec = json.loads((root / "cuda.json").read_text())
    (root / "cuda.json").write_text(json.dumps({**rec, "cuInit": {"error": 100}}))
    got = labels(root)
    assert "nvidia.cuda.major" not in got
    assert (got["product"], got["memory-mib"]) == ("NVIDIA-Tegra-X1", "3963")


def test_l4t_release_line() -> None:
    host = HostRoot(str(fixture_root("real-jetson-thor")))
    assert tegra.l4t_release(host) == "38.2.0"
    assert tegra.soc(host) == "tegra264"
