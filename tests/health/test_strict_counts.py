"""Every count read for health is parsed strictly (ASCII digits, at most 20): a bad one is a
warning naming the file, the scan goes on. On main ``"²".isdigit()`` passed and ``int()``
then raised, and 5,000 digits passed Python's 4,300-digit limit: the scan crashed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nfd_gpu.discovery.amd.ras import parse_features
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"
AER = "sys/bus/pci/devices/0000:18:00.0/aer_dev_fatal"
RAS = "sys/bus/pci/devices/0000:e3:00.0/ras/umc_err_count"
BAD = ["\u00b2", "\u0663", "1" * 5000, "12a", "-1", "1_000", "\uff15"]


@pytest.mark.parametrize("bad", BAD)
def test_bad_aer_count_is_a_warning_naming_the_file(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-aer-fatal"), root, symlinks=True)
    (root / AER).write_text(f"Undefined 0\nTOTAL_ERR_FATAL {bad}\n")
    res = run_scan(root)
    assert any(w.startswith(f"/{AER}: TOTAL_ERR_FATAL: not a count") for w in res.warnings)
    assert f"{G}/count" in res.labels  # the scan went on
    g = next(g for g in res.snapshot.gpus if g.address == "0000:18:00.0")
    assert "aer-fatal" not in {r.reason for r in g.health.reasons}


@pytest.mark.parametrize("bad", BAD)
def test_bad_ras_count_is_a_warning_naming_the_file(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("mi210-ras-ue"), root, symlinks=True)
    (root / RAS).write_text(f"ue: {bad}\nce: 0\n")
    res = run_scan(root)
    assert any(w.startswith(f"/{RAS}: not a count") for w in res.warnings), res.warnings
    assert f"{G}/count" in res.labels


def test_good_counts_still_read() -> None:
    res = run_scan(fixture_root("h100-aer-fatal"))
    assert res.labels[f"{G}/health"] == "failed"
    assert run_scan(fixture_root("mi210-ras-ue")).labels[f"{G}/health"] == "failed"


def test_ras_feature_mask_is_ascii_hex() -> None:
    assert parse_features("feature mask: 0x3fff") == 0x3FFF
    for bad in ("0x1_f", "0x" + "f" * 17, "0x\u0663", "0x", "zz"):
        assert parse_features(f"feature mask: {bad}") is None, bad
