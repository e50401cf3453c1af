"""The nvidia profile with GFD's tegra strategy (nfd_gpu/labels/nvidia_tegra.py) on the Jetson
fixtures: the listing's deviceQuery values in GFD's keys (tests/e2e/test_gfd_judge.py has
GFD's own code judge every key)."""

from __future__ import annotations

import dataclasses

import pytest

from nfd_gpu.labels.nvidia_options import NvidiaOptions
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

N = "nvidia.com"


def nvidia(name: str, **opts: object) -> dict[str, str]:
    options = dataclasses.replace(NvidiaOptions(), **opts)  # type: ignore[arg-type]
    got = run_scan(fixture_root(name), profiles=["nvidia"], nvidia_options=options).labels
    return {k.removeprefix(f"{N}/"): v for k, v in got.items()}


@pytest.mark.parametrize(
    ("name", "product", "memory", "cc", "cuda", "family"),
    [
        ("real-jetson-nano", "NVIDIA-Tegra-X1", "3963", ("5", "3"), "10.0", "maxwell"),
        ("real-jetson-xavier", "Xavier", "31003", ("7", "2"), "11.8", "volta"),
        ("real-jetson-orin-jp6", "Orin", "54792", ("8", "7"), "12.9", "ampere"),
    ],
)
def test_tegra_strategy_is_the_deviceQuery_listing(
    name: str, product: str, memory: str, cc: tuple[str, str], cuda: str, family: str
) -> None:
    got = nvidia(name, discovery="tegra")
    assert (got["gpu.product"], got["gpu.memory"], got["gpu.family"]) == (product, memory, family)
    assert (got["gpu.compute.major"], got["gpu.compute.minor"]) == cc
    assert got["cuda.runtime-version.full"] == cuda
    assert got["cuda.driver-version.full"] == "unknown.unknown.unknown"
    assert (got["gpu.count"], got["gpu.mode"], got["mig.capable"]) == ("1", "unknown", "false")
    assert got["vgpu.present"] == "false"


def test_auto_without_the_release_file_is_not_tegra() -> None:
    # GFD's auto needs /etc/nv_tegra_release (or soc0/family): without it, no platform
    assert nvidia("real-jetson-xavier") == {}


@pytest.mark.parametrize("name", ["real-jetson-orin-jp7", "real-jetson-thor"])
def test_tegra_without_cuda_fails_as_gfd(name: str) -> None:
    assert nvidia(name) == {}  # auto is tegra here; CUDA does not answer: GFD's init fails
    assert nvidia(name, fail_on_init_error=False) == {"vgpu.present": "false"}
