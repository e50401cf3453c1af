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


# -- issue 34, finding 7: hard links, modes, linear in what is copied -------------------


def test_hard_linked_file_is_not_copied(tmp_path: Path) -> None:
    """A root-only file hard-linked into the tree (same filesystem) was copied, its mode
    widened to 0644; now a file with more than one link is skipped and said."""
    root = tmp_path / "root"
    dev = root / "sys/devices/pci0000:00/0000:00:02.0"
    dev.mkdir(parents=True)
    secret = tmp_path / "shadow"
    secret.write_text("root:x:secret\n")
    secret.chmod(0o600)
    os.link(secret, dev / "label")
    dest = tmp_path / "snap"
    report = CaptureReport(str(dest))
    dest.mkdir()
    copier = _Copier(str(root), str(dest), report)
    copier.copy("sys/devices/pci0000:00/0000:00:02.0/label")
    copier.close()
    assert not (dest / "sys/devices/pci0000:00/0000:00:02.0/label").exists()
    assert any("2 hard links" in s for s in report.skipped), report.skipped


def test_copied_files_keep_their_mode(tmp_path: Path) -> None:
    root = tmp_path / "root"
    dev = root / "sys/devices/pci0000:00/0000:00:02.0"
    dev.mkdir(parents=True)
    for name, mode in (("config", 0o600), ("vendor", 0o444), ("reset", 0o200)):
        (dev / name).write_text("x\n")
        (dev / name).chmod(mode)
    dest = tmp_path / "snap"
    dest.mkdir()
    copier = _Copier(str(root), str(dest), CaptureReport(str(dest)))
    for name in ("config", "vendor", "reset"):
        copier.copy(f"sys/devices/pci0000:00/0000:00:02.0/{name}")
    copier.close()
    got = {p.name: p.stat().st_mode & 0o7777 for p in (dest / dev.relative_to(root)).iterdir()}
    assert got == {"config": 0o600, "vendor": 0o444, "reset": 0o200}


class _CountingList(list[str]):
    """A list that counts the elements a membership test walks."""

    walked = 0

    def __contains__(self, item: object) -> bool:
        _CountingList.walked += len(self)
        return super().__contains__(item)


def test_copy_work_is_linear_in_files(tmp_path: Path) -> None:
    """4,000 functions took 15 s, 100,000 not 15 min: every copied file searched the list
    of files copied so far. Now a set: no walk over the list per file."""
    n = 6000
    root = tmp_path / "root"
    fns = root / "sys/devices/pci0000:00"
    for i in range(n // 6):
        d = fns / f"0000:{i // 32:02x}:{i % 32:02x}.0"
        d.mkdir(parents=True)
        for name in ("class", "vendor", "device", "uevent", "numa_node", "revision"):
            (d / name).write_text("0x0\n")
    dest = tmp_path / "snap"
    dest.mkdir()
    report = CaptureReport(str(dest))
    report.files = _CountingList()
    _CountingList.walked = 0
    copier = _Copier(str(root), str(dest), report)
    for f in sorted(fns.glob("*/*")):
        copier.copy(str(f.relative_to(root)))
    copier.close()
    assert len(report.files) == n
    assert _CountingList.walked <= n, _CountingList.walked  # main: n * (n - 1) / 2
