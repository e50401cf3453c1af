"""Device nodes, FIFOs and sockets planted in a root where an attribute file belongs
HostRoot reads only regular files. A character device (``mknod ... c 1 5``, /dev/zero
here; /dev/kmsg on the host where this was found put a kernel log record into
``--format json``) or a block device is closed unread with a warning naming it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
from pathlib import Path

import pytest

from nfd_gpu.host import HostRoot
from nfd_gpu.scan import run_scan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
ATTR = "sys/class/dmi/id/product_name"


def _plant(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
        return
    if os.geteuid() != 0:
        pytest.skip("mknod needs root (CI runs as root)")
    if kind == "chardev":  # /dev/zero: 65,537 NUL bytes were read and "truncated"
        os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 5))
    else:  # /dev/loop0's numbers: raw disk bytes on a host that backs it
        os.mknod(path, stat.S_IFBLK | 0o644, os.makedev(7, 0))


KINDS = {
    "chardev": "a character device",
    "blockdev": "a block device",
    "fifo": "a FIFO",
    "socket": "a socket",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_planted_node_is_not_read(
    tmp_path: Path, kind: str, resolver: object, bounded: None
) -> None:
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "hgx-h100", root, symlinks=True)
    _plant(root / ATTR, kind)
    res = run_scan(root, profiles=("neutral", "nvidia"))
    want = f"/{ATTR}: not a regular file ({KINDS[kind]}), not read"
    if kind == "socket":  # open() itself refuses a socket (ENXIO): nothing is opened
        assert any(w.startswith(f"/{ATTR}: ") for w in res.warnings), res.warnings
    else:
        assert want in res.warnings, res.warnings
    assert not any("truncated" in w for w in res.warnings), res.warnings
    dump = json.dumps([res.labels, res.snapshot.to_dict()])
    assert "\\u0000" not in dump
    assert res.complete


@pytest.mark.parametrize("kind", ["chardev", "fifo"])
def test_read_at_refuses_a_planted_node(tmp_path: Path, kind: str, resolver: object) -> None:
    """pread (PCI config space) is held to the same rule."""
    (tmp_path / "sys").mkdir()
    f = tmp_path / "sys/config"
    f.write_bytes(b"\x86\x80")
    _plant(f, kind)
    h = HostRoot(tmp_path)
    assert h.read_at("sys/config", 0, 64) is None
    assert h.warnings == [f"/sys/config: not a regular file ({KINDS[kind]}), not read"]
