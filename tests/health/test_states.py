"""States that say what is known: a GPU the driver has but cannot use is ``failed`` with
its reason; a GPU with no driver is ``no-driver`` (neither ``ok`` nor ``failed``); ``ok``
only when a signal of the GPU itself was read and is clear (docs/health.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root(name), root, symlinks=True)
    return root


def _states(root: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    snap = run_scan(root).snapshot
    return {
        g.address: (g.health.state, tuple(r.reason for r in g.health.reasons)) for g in snap.gpus
    }


def test_no_driver_is_neither_ok_nor_failed() -> None:
    """On main: ``health=ok`` from the PCIe link alone."""
    root = fixture_root("h100-no-driver")
    assert set(_states(root).values()) == {("no-driver", ("no-driver",))}
    labels = run_scan(root).labels
    assert labels[f"{G}/health"] == "no-driver"
    assert labels[f"{G}/health.no-driver.count"] == "2"
    assert f"{G}/health.failed.count" not in labels


def test_nvml_init_failure_with_driver_bound_is_failed(tmp_path: Path) -> None:
    """nvmlInit fails (library present, GPUs bound to nvidia): a driver that cannot use its
    GPUs. On main: ``health=ok`` (only the PCIe link was read)."""
    root = _copy(tmp_path, "h100-xid-79")
    rec = json.loads((root / "nvml.json").read_text())
    rec["nvmlInit"] = {"error": "LibRmVersionMismatch"}
    (root / "nvml.json").write_text(json.dumps(rec))
    states = _states(root)
    assert states and set(states.values()) == {("failed", ("nvml-init-failed",))}
    labels = run_scan(root).labels
    assert labels[f"{G}/health"] == "failed"
    assert labels[f"{G}/health.all-failed"] == "true"


def test_nvml_no_devices_with_driver_listing_them_is_failed(tmp_path: Path) -> None:
    """NVML "no devices" (count 0: RmInitAdapter failed) while procfs lists the GPUs."""
    root = _copy(tmp_path, "h100-xid-79")
    rec = json.loads((root / "nvml.json").read_text())
    rec["devices"], rec["events"] = [], []
    (root / "nvml.json").write_text(json.dumps(rec))
    assert set(_states(root).values()) == {("failed", ("not-answering",))}


def test_ok_needs_a_signal_of_the_gpu_itself() -> None:
    """procfs only (no NVML), amdgpu with RAS off, i915: only bus signals were read, so
    nothing is known about the GPU: ``unknown``, no ``health`` label (main: ``ok``)."""
    for name in ("workstation-rtx4090", "mi210-8x", "arc-a770"):
        snap = run_scan(fixture_root(name)).snapshot
        assert {g.health.state for g in snap.gpus} == {"unknown"}, name
        assert f"{G}/health" not in run_scan(fixture_root(name)).labels, name
    # NVML answered: ok
    assert run_scan(fixture_root("h100-xid-79")).labels[f"{G}/health"] == "ok"


def test_driver_not_loaded_yet_is_not_a_fault(tmp_path: Path) -> None:
    """nvmlInit's ``Driver Not Loaded`` while the driver container starts: no fault."""
    root = _copy(tmp_path, "h100-xid-79")
    rec = json.loads((root / "nvml.json").read_text())
    rec["nvmlInit"] = {"error": "DriverNotLoaded"}
    (root / "nvml.json").write_text(json.dumps(rec))
    assert set(_states(root).values()) == {("unknown", ())}


def test_an_integrated_gpu_that_is_no_pci_function_is_not_no_driver() -> None:
    """Tegra's GPU has no PCI driver link to miss."""
    snap = run_scan(fixture_root("real-jetson-orin-jp6")).snapshot
    assert [r.reason for g in snap.gpus for r in g.health.reasons] == []
    assert (
        f"{G}/health.no-driver.count" not in run_scan(fixture_root("real-jetson-orin-jp6")).labels
    )
