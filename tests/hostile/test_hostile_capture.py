"""``nfd-gpu snapshot DIR --root T`` on a hostile T: every read goes
through HostRoot (confined to T: a link to /etc/shadow is re-rooted into T, and a link
climbing out stops at T), every write stays inside DIR (a new or empty directory, never a
link; created component by component with O_NOFOLLOW, files with O_EXCL)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nfd_gpu.capture import CaptureError, _Dest, capture_host
from nfd_gpu.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
SECRET = "TOP-SECRET-OUTSIDE-THE-ROOT"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    p = tmp_path / "outside" / "shadow"
    p.parent.mkdir()
    p.write_text(SECRET + "\n")
    return p


def _secret_in(dest: Path) -> list[str]:
    found = []
    for dirpath, _, files in os.walk(dest):
        for n in files:
            p = Path(dirpath) / n
            if not p.is_symlink() and SECRET.encode() in p.read_bytes():
                found.append(str(p.relative_to(dest)))
    return found


@pytest.mark.parametrize("rel", ["usr/share/misc/pci.ids", "nvml.json"])
@pytest.mark.parametrize("how", ["absolute", "climbing"])
def test_linked_copy_steps_stay_in_the_root(
    tmp_path: Path, outside: Path, rel: str, how: str, bounded: None
) -> None:
    """pci.ids and nvml.json were copied with plain open(): a link to a file outside the
    root put that whole file into DIR."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "hgx-h100", root, symlinks=True)
    link = root / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() or link.is_symlink():
        link.unlink()
    depth = rel.count("/")
    target = str(outside) if how == "absolute" else "../" * (depth + 30) + str(outside)[1:]
    link.symlink_to(target)
    dest = tmp_path / "snap"
    capture_host(dest, root, nvml_lib=None)
    assert _secret_in(dest) == []


def test_dest_that_is_a_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest = tmp_path / "snap"
    dest.symlink_to(elsewhere)
    with pytest.raises(CaptureError, match="a symbolic link"):
        capture_host(dest, FIXTURES / "a100-t4")
    assert main(["snapshot", str(dest), "--root", str(FIXTURES / "a100-t4")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert os.listdir(elsewhere) == []


def test_writes_follow_no_link_inside_dest(tmp_path: Path) -> None:
    """A link inside DIR (planted there while a snapshot runs) is never written through:
    a directory component or a file that is a link fails the write, nothing lands
    outside DIR."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest = tmp_path / "snap"
    dest.mkdir()
    (dest / "sys").symlink_to(elsewhere)
    (dest / "file").symlink_to(elsewhere / "file")
    out = _Dest(str(dest))
    try:
        with pytest.raises(OSError):
            out.write("sys/x", b"data")
        with pytest.raises(OSError):
            out.mkdir("sys/y")
        assert out.write("file", b"data") is False
        with pytest.raises(OSError):
            out.write("file", b"data", replace=True)
    finally:
        out.close()
    assert os.listdir(elsewhere) == []


def test_snapshot_of_a_planted_device_is_a_marker(tmp_path: Path) -> None:
    """A device node where an attribute file belongs: copied as an empty marker, never
    opened for its bytes (the scan refused it too)."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root (CI runs as root)")
    import stat

    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "hgx-h100", root, symlinks=True)
    pn = root / "sys/class/dmi/id/product_name"
    pn.unlink()
    os.mknod(pn, stat.S_IFCHR | 0o644, os.makedev(1, 5))
    dest = tmp_path / "snap"
    report = capture_host(dest, root)
    copied = dest / "sys/class/dmi/id/product_name"
    assert copied.is_file() and copied.stat().st_size == 0
    assert "sys/class/dmi/id/product_name" in report.markers
