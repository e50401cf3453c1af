"""HostRoot: bounded, safe reads that warn instead of raising."""

from __future__ import annotations

import os
from pathlib import Path

from nfd_gpu.host import MAX_READ, HostRoot


def make(tmp_path: Path) -> HostRoot:
    (tmp_path / "sys").mkdir()
    return HostRoot(tmp_path)


def test_plain_read_and_int(tmp_path: Path) -> None:
    h = make(tmp_path)
    (tmp_path / "sys/n").write_text("  42\n")
    assert h.read_text("sys/n") == "42"
    assert h.read_int("sys/n") == 42
    (tmp_path / "sys/hex").write_text("0x1f\n")
    assert h.read_int("sys/hex", base=0) == 31
    assert h.warnings == []


def test_missing_optional_is_silent_required_warns(tmp_path: Path) -> None:
    h = make(tmp_path)
    assert h.read_text("sys/none") is None
    assert h.warnings == []
    assert h.read_text("sys/none", optional=False) is None
    assert h.warnings == ["/sys/none: missing"]


def test_dangling_link(tmp_path: Path) -> None:
    h = make(tmp_path)
    os.symlink("nowhere", tmp_path / "sys/dangling")
    assert h.read_text("sys/dangling") is None
    assert h.warnings == ["/sys/dangling: dangling symbolic link"]


def test_link_loop(tmp_path: Path) -> None:
    h = make(tmp_path)
    os.symlink("b", tmp_path / "sys/a")
    os.symlink("a", tmp_path / "sys/b")
    assert h.read_text("sys/a") is None
    assert "loop" in h.warnings[0]


def test_directory_where_file_belongs(tmp_path: Path) -> None:
    h = make(tmp_path)
    (tmp_path / "sys/dir").mkdir()
    assert h.read_text("sys/dir") is None
    assert h.warnings == ["/sys/dir: is a directory, expected a file"]


def test_file_where_directory_belongs(tmp_path: Path) -> None:
    h = make(tmp_path)
    (tmp_path / "sys/f").write_text("x")
    assert h.read_text("sys/f/child") is None
    assert h.listdir("sys/f") == []
    assert len(h.warnings) == 2


def test_garbage_bytes_and_nul(tmp_path: Path) -> None:
    h = make(tmp_path)
    (tmp_path / "sys/g").write_bytes(b"\xff\xfe\x00abc\x00\n")
    assert h.read_text("sys/g") == "\ufffd\ufffdabc"
    assert h.read_int("sys/g") is None
    assert "not an integer" in h.warnings[0]


def test_bounded_read(tmp_path: Path) -> None:
    h = make(tmp_path)
    (tmp_path / "sys/big").write_bytes(b"a" * (MAX_READ * 3))
    data = h.read_bytes("sys/big")
    assert data is not None and len(data) == MAX_READ
    assert "truncated" in h.warnings[0]


def test_fifo_is_not_opened_blocking(tmp_path: Path) -> None:
    """A FIFO in a fixture must not hang the scan (opened non-blocking, read empty)."""
    h = make(tmp_path)
    os.mkfifo(tmp_path / "sys/fifo")
    assert h.read_text("sys/fifo") in (None, "")


def test_readlink_name_and_not_a_link(tmp_path: Path) -> None:
    h = make(tmp_path)
    os.symlink("../../bus/pci/drivers/nvidia", tmp_path / "sys/driver")
    assert h.readlink_name("sys/driver") == "nvidia"
    (tmp_path / "sys/plain").write_text("x")
    assert h.readlink_name("sys/plain") is None
    assert h.warnings == ["/sys/plain: expected a symbolic link"]


def test_listdir_sorted(tmp_path: Path) -> None:
    h = make(tmp_path)
    for n in ("b", "a", "c"):
        (tmp_path / "sys" / n).write_text("")
    assert h.listdir("sys") == ["a", "b", "c"]
    assert h.listdir("sys/missing") == []


def test_root_slash_paths() -> None:
    assert HostRoot("/").path("sys/bus") == "/sys/bus"
    assert HostRoot("/host/").path("/sys/bus") == "/host/sys/bus"
