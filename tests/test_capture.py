"""``nfd-gpu snapshot``: capture, then ``scan --root DIR`` replays the same output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.capture import CaptureError, CaptureReport, _Copier, capture_host
from nfd_gpu.cli import main
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, fixture_root

PROFILES = ("neutral", "nvidia")
NVML_FIXTURES = [n for n in ALL_FIXTURES if (fixture_root(n) / "nvml.json").exists()]


def _records(root: Path) -> dict[str, Any]:
    r = run_scan(root, profiles=PROFILES)
    snap = r.snapshot.to_dict()
    snap.pop("root")
    return {"labels": r.labels, "features": r.features, "snapshot": snap, "warnings": r.warnings}


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_round_trip_every_fixture(name: str, tmp_path: Path) -> None:
    dest = tmp_path / "snap"
    capture_host(dest, fixture_root(name))
    for profile in PROFILES:
        want = run_scan(fixture_root(name), profiles=[profile]).labels
        assert run_scan(dest, profiles=[profile]).labels == want, profile
    assert _records(dest) == _records(fixture_root(name))


@pytest.mark.parametrize("name", NVML_FIXTURES)
def test_recording_through_the_adapter_replays(name: str, tmp_path: Path) -> None:
    lib = nvml_replay.load(str(fixture_root(name) / "nvml.json"))
    dest = tmp_path / "snap"
    report = capture_host(dest, fixture_root(name), nvml_lib=lib)
    assert report.nvml == "recorded"
    recorded = json.loads((dest / "nvml.json").read_text())
    original = json.loads((fixture_root(name) / "nvml.json").read_text())
    assert len(recorded["devices"]) == len(original["devices"])
    for profile in PROFILES:
        want = run_scan(fixture_root(name), profiles=[profile]).labels
        assert run_scan(dest, profiles=[profile]).labels == want, profile
    assert _records(dest) == _records(fixture_root(name))


def test_snapshot_contains_only_what_was_read(tmp_path: Path) -> None:
    dest = tmp_path / "snap"
    capture_host(dest, fixture_root("dgx-a100-mig-mixed"))
    for dirpath, dirnames, filenames in os.walk(dest):
        for n in filenames + dirnames:
            p = Path(dirpath) / n
            if p.is_symlink():
                target = os.readlink(p)
                assert not target.startswith("/"), p
                assert os.path.realpath(p).startswith(os.path.realpath(dest)), p
    dev = dest / "dev"
    assert sorted(os.listdir(dev)) == sorted(
        n for n in os.listdir(fixture_root("dgx-a100-mig-mixed") / "dev") if n.startswith("nvidia")
    )
    assert all((dev / n).stat().st_size == 0 for n in os.listdir(dev))
    assert not (dest / "etc").exists()
    manifest = json.loads((dest / "SNAPSHOT.json").read_text())
    assert manifest["nvml"] == "copied"
    assert "proc/driver/nvidia/version" in manifest["files"]


def test_links_and_bounded_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    dev = root / "sys/devices/pci0000:00/0000:00:02.0"
    dev.mkdir(parents=True)
    (dev / "uevent").write_text("PCI_CLASS=30000\nPCI_ID=8086:A780\nDRIVER=i915\n")
    (dev / "class").write_text("0x030000\n")
    (dev / "vendor").write_text("0x8086\n")
    (dev / "device").write_text("0xa780\n")
    (dev / "numa_node").write_bytes(b"0" * (200 * 1024))  # huge: truncated on read
    links = root / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    (links / "0000:00:02.0").symlink_to("../../../devices/pci0000:00/0000:00:02.0")
    # an absolute link (resolved inside the root): rewritten relative, DIR is self-contained
    (root / "sys/class").mkdir()
    (root / "sys/class/gpu0").symlink_to(f"/{dev.relative_to(root)}")
    secret = root / "etc/shadow"
    secret.parent.mkdir()
    secret.write_text("root:x:secret\n")
    dest = tmp_path / "snap"
    capture_host(dest, root)
    link = dest / "sys/bus/pci/devices/0000:00:02.0"
    assert os.readlink(link) == "../../../devices/pci0000:00/0000:00:02.0"
    assert (link / "uevent").read_text().startswith("PCI_CLASS")
    assert (dest / "sys/devices/pci0000:00/0000:00:02.0/numa_node").stat().st_size == 64 * 1024 + 1
    assert not (dest / "etc").exists()
    _Copier(str(root), str(dest), CaptureReport(str(dest))).copy("sys/class/gpu0/vendor")
    assert os.readlink(dest / "sys/class/gpu0") == "../devices/pci0000:00/0000:00:02.0"
    assert (dest / "sys/class/gpu0/vendor").read_text() == "0x8086\n"
    # a relative link climbing above the root stays inside DIR
    (root / "sys/class/up").symlink_to("../../../../../sys/devices")
    _Copier(str(root), str(dest), CaptureReport(str(dest))).copy("sys/class/up")
    assert os.readlink(dest / "sys/class/up") == "../devices"


def test_refuses_a_non_empty_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(CaptureError):
        capture_host(tmp_path, fixture_root("a100-t4"))
    assert main(["snapshot", str(tmp_path), "--root", str(fixture_root("a100-t4"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not empty" in err


def test_cli_snapshot_then_scan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "snap"
    root = str(fixture_root("h100-mig-single"))
    assert main(["snapshot", str(dest), "--root", root]) == 0
    assert "nvml copied" in capsys.readouterr().out
    assert main(["scan", "--root", root, "-p", "nvidia"]) == 0
    want = capsys.readouterr().out
    assert main(["scan", "--root", str(dest), "-p", "nvidia"]) == 0
    assert capsys.readouterr().out == want


def test_snapshot_keeps_what_the_peers_read(tmp_path: Path) -> None:
    # nfd-worker's pci source and GFD's nvpci read these of every PCI function; a scan does
    # not, so the snapshot copies them on purpose (each one the fixture has, byte for byte)
    from nfd_gpu.capture import PEER_PCI_FILES

    root = fixture_root("nvidia-vgpu-guest")
    dest = tmp_path / "snap"
    capture_host(dest, root)
    devices = root / "sys/bus/pci/devices"
    copied = 0
    for dev in sorted(devices.iterdir()):
        for name in PEER_PCI_FILES:
            src = dev / name
            if src.is_file():
                got = dest / "sys/bus/pci/devices" / dev.name / name
                assert got.read_bytes() == src.read_bytes(), got
                copied += 1
    assert copied >= len(list(devices.iterdir())) * 6
