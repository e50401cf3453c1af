"""Stable names: a GPU's product, family and compute capability do not depend
on whether NVML answers, and where they come from is visible (``Gpu.provenance``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nfd_gpu.catalog import tables
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, fixture_root, nfd_gpu_cmd

# the NVIDIA fixtures with an NVML recording that lists a GPU: on the others NVML has
# nothing to change (the RmInitAdapter listings: NVML answers, but for no GPU)
NVIDIA_FIXTURES = [
    n for n in ALL_FIXTURES
    if (fixture_root(n) / "nvml.json").exists()
    and json.loads((fixture_root(n) / "nvml.json").read_text()).get("devices") != []
]  # fmt: skip
G = "gpu.feature.node.kubernetes.io"
STABLE = ("product", "family", "compute.major", "compute.minor")


def _identity(labels: dict[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in labels.items()
        if k.removeprefix(f"{G}/") in STABLE or k.startswith(f"{G}/product.")
    }


def test_the_recorded_fixtures_are_all_here() -> None:
    assert {"h200-vm", "h100-mig-single", "nvidia-vgpu-guest", "hyperv-p100-vm"} <= set(
        NVIDIA_FIXTURES
    )


def _known(vendor: str, device: str, revision: str) -> bool:
    """The table gives the device's name, family and compute capability."""
    info = tables.lookup(vendor, device, revision)
    return bool(info and info.name and info.family and info.compute_major is not None)


@pytest.mark.parametrize("name", NVIDIA_FIXTURES)
def test_identity_labels_identical_with_and_without_nvml(name: str) -> None:
    with_nvml = run_scan(fixture_root(name))
    without = run_scan(fixture_root(name), nvml="off")
    # NVML did answer (for at least one GPU: h100-gpu-lost loses the other)
    assert "nvml" in {g.provenance.get("product") for g in with_nvml.snapshot.gpus}
    for a, b in zip(with_nvml.snapshot.gpus, without.snapshot.gpus, strict=True):
        assert a.product == b.product, a.address  # the driver (NVML or procfs) names it
        if _known(a.vendor, a.device_id, a.revision):
            assert a.family == b.family, a.address
            assert (a.nvidia.compute_major, a.nvidia.compute_minor) == (
                b.nvidia.compute_major,
                b.nvidia.compute_minor,
            ), a.address
        elif (info := tables.lookup(a.vendor, a.device_id, a.revision)) and info.family:
            # family known, compute capability not (Tesla K40m): the same family either way
            assert a.family == b.family == info.family, a.address
        else:
            # a device the tables do not know: only NVML gives its compute capability and
            # family; without NVML it is named in an unknown-GPU warning, never guessed
            assert b.family is None and a.family is not None, a.address
            assert any(w.startswith("unknown GPU") and a.address in w for w in without.warnings)
    if all(_known(g.vendor, g.device_id, g.revision) for g in with_nvml.snapshot.gpus):
        assert _identity(with_nvml.labels) == _identity(without.labels)
    assert _identity(with_nvml.labels)[f"{G}/product"]


@pytest.mark.parametrize("name", NVIDIA_FIXTURES)
def test_table_names_are_the_drivers(name: str) -> None:
    """A device the table knows gets the same product without any driver: the table's
    name is the one the driver reports, for every fixture GPU the table knows."""
    for g in run_scan(fixture_root(name)).snapshot.gpus:
        info = tables.lookup(g.vendor, g.device_id, g.revision)
        if g.vendor != "nvidia" or info is None or info.name is None:
            continue
        if g.mode == "vgpu-guest":  # the driver names the vGPU type, the table the board
            continue
        assert g.provenance["product"] in ("nvml", "procfs"), g.address
        assert g.product == info.name, g.address


def test_pci_ids_is_the_last_resort_and_visible() -> None:
    """Without a driver and for a device the table names, pci.ids is not consulted; the
    provenance says which source named each GPU."""
    snap = run_scan(fixture_root("h100-no-driver"), nvml="off").snapshot
    assert {g.provenance["product"] for g in snap.gpus} == {"table"}


def test_pci_ids_use_is_in_the_json_provenance(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The P100 VM without its driver (no procfs, no NVML) but with the host's pci.ids: the
    product comes from the table when it knows 15f8, else from pci.ids, and `scan --format
    json` says which."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hyperv-p100-vm"), root, symlinks=True)
    shutil.rmtree(root / "proc/driver/nvidia")
    (root / "nvml.json").unlink()
    (root / "usr/share/misc").mkdir(parents=True)
    shutil.copy(fixture_root("h100-no-driver") / "usr/share/misc/pci.ids", root / "usr/share/misc")
    p = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--root", str(root), "--format", "json"],
        capture_output=True, text=True, env=subprocess_env, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    (gpu,) = json.loads(p.stdout)["gpus"]
    info = tables.lookup("nvidia", "15f8", "a1")
    if info is not None and info.name:
        assert (gpu["product"], gpu["sources"]["product"]) == (info.name, "table")
    else:
        assert (gpu["product"], gpu["sources"]["product"]) == (
            "NVIDIA Tesla P100 PCIe 16GB",  # pci.ids: GP100GL [Tesla P100 PCIe 16GB]
            "pci.ids",
        )
