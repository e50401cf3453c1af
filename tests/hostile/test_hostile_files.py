"""Input files the operator names: the configuration file,
the sharing config, rule files, a kubeconfig, a features document. Each is read by the one
bounded reader (nfd_gpu/host/boundedfile.py): a FIFO, a device node, a socket or a directory is
refused without a read and without waiting, a file over its cap is refused by its size
before a byte is read, and the error is one line naming the file."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from nfd_gpu.config.loader import ConfigError
from nfd_gpu.config.loader import load as load_config
from nfd_gpu.config.sharing import load_sharing_config
from nfd_gpu.host import boundedfile
from nfd_gpu.host.boundedfile import CONFIG_MAX, FileReadError
from nfd_gpu.rules import load_rules
from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.nodefeature import build_api_client
from tests.hostile.conftest import CASE_BYTES
from tests.memory import run_cli_with_peak

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root (CI runs as root)")


def _cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """``nfd-gpu ARGS`` in its own process: a hang is a TimeoutExpired, i.e. a failure."""
    p, peak = run_cli_with_peak(list(args), timeout=timeout)
    assert peak < CASE_BYTES, f"nfd-gpu {' '.join(args)}: peak RSS {peak >> 20} MB"
    return p


def _one_error(p: subprocess.CompletedProcess[str]) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


# -- a FIFO as --config or --sharing-config -------------------------------------


def test_fifo_as_config_does_not_hang_the_agent(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    p = _cli("run", "--oneshot", "--no-udev", "--config", str(fifo))
    assert p.returncode == 2
    assert _one_error(p) == (
        f"nfd-gpu: error: {fifo}: cannot read config file: not a regular file (a FIFO)"
    )


def test_fifo_as_sharing_config_does_not_hang_the_agent(tmp_path: Path) -> None:
    """The agent re-reads the sharing config every pass: a FIFO there blocked the first
    pass for ever (no pass, no log line); now the pass runs and the file is named. With no
    valid version of it, nothing is published (a oneshot run exits 1)."""
    fifo = tmp_path / "sharing.yaml"
    os.mkfifo(fifo)
    out = tmp_path / "features.d"
    p = _cli(
        "run", "--oneshot", "--no-udev", "--root", str(FIXTURES / "hgx-h100"),
        "--profile", "nvidia", "--sharing-config", str(fifo), "--features-dir", str(out),
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert f"{fifo}: not a regular file (a FIFO)" in p.stderr
    assert not (out / "nfd-gpu").exists()


def test_fifo_as_sharing_config_of_scan_is_one_error(tmp_path: Path) -> None:
    fifo = tmp_path / "sharing.yaml"
    os.mkfifo(fifo)
    p = _cli("scan", "--root", str(FIXTURES / "hgx-h100"), "--sharing-config", str(fifo))
    assert p.returncode == 2
    assert _one_error(p) == f"nfd-gpu: error: --sharing-config {fifo}: not a regular file (a FIFO)"


# -- no size cap ------------------------------------------------------------------


def test_100_mb_config_is_refused_by_its_size(tmp_path: Path, bounded: None) -> None:
    """Refused by ``st_size`` before a byte is read (the file is sparse: reading it would
    give 100 MB of NULs, and the message would be a YAML error, not the size)."""
    big = tmp_path / "config.yaml"
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)
    with pytest.raises(ConfigError) as e:
        load_config(str(big), env={})
    assert str(e.value) == (
        f"{big}: cannot read config file: file is {100 * 1024 * 1024} bytes, "
        f"larger than the {CONFIG_MAX} allowed"
    )


def test_100_mb_sharing_config_is_refused_by_its_size(tmp_path: Path, bounded: None) -> None:
    big = tmp_path / "sharing.yaml"
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)
    with pytest.raises(ValueError, match=rf"^{big}: file is 104857600 bytes, larger than"):
        load_sharing_config(str(big))


def test_config_at_the_cap_is_read(tmp_path: Path, bounded: None) -> None:
    """The cap is a ConfigMap's 1 MiB: a file of exactly that size is still a config."""
    f = tmp_path / "config.yaml"
    head = b"interval: 30\n"
    f.write_bytes(head + b"#" * (CONFIG_MAX - len(head) - 1) + b"\n")
    assert load_config(str(f), env={}).interval == 30.0
    with open(f, "ab") as out:
        out.write(b"\n")
    with pytest.raises(ConfigError, match="larger than the 1048576 allowed"):
        load_config(str(f), env={})


# -- every kind of non-regular file, for every reader -----------------------------------------


def _plant(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / f"{kind}.yaml"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    else:
        if os.geteuid() != 0:
            pytest.skip("mknod needs root (CI runs as root)")
        mode = stat.S_IFCHR if kind == "chardev" else stat.S_IFBLK
        os.mknod(p, mode | 0o644, os.makedev(1, 3) if kind == "chardev" else os.makedev(7, 0))
    return p


KINDS = {
    "fifo": "a FIFO",
    "directory": "a directory",
    "socket": "a socket",
    "chardev": "a character device",
    "blockdev": "a block device",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_non_regular_files_are_refused_unread(tmp_path: Path, kind: str, bounded: None) -> None:
    path = _plant(tmp_path, kind)
    want = f"{path}: not a regular file ({KINDS[kind]})"
    with pytest.raises(FileReadError) as e:
        boundedfile.read(path)
    assert str(e.value) == want
    with pytest.raises(ConfigError) as ce:
        load_config(str(path), env={})
    assert str(ce.value) == f"{path}: cannot read config file: not a regular file ({KINDS[kind]})"
    with pytest.raises(ValueError, match=f"^{re.escape(want)}$"):
        load_sharing_config(str(path))
    with pytest.raises(SinkError, match=re.escape(want)):
        build_api_client(str(path))


def test_fifo_in_a_rule_directory_is_a_problem_not_skipped(tmp_path: Path, bounded: None) -> None:
    """A rule directory entry that is not a regular file is reported (was silently left
    out of the listing: its labels vanished without a line)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    os.mkfifo(rules / "a.yaml")
    (rules / "b.yaml").mkdir()
    rs = load_rules(rules, tolerant=True)
    assert rs.problems == (
        f"{rules / 'a.yaml'}: not a regular file (a FIFO)",
        f"{rules / 'b.yaml'}: not a regular file (a directory)",
    )


def test_fifo_as_features_document_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "features.yaml"
    os.mkfifo(fifo)
    rules = tmp_path / "r.yaml"
    rules.write_text("rules: []\n")
    p = _cli("rules", "test", str(rules), "--features", str(fifo))
    assert p.returncode == 2
    assert f"{fifo}: not a regular file (a FIFO)" in _one_error(p)


def test_links_are_followed_as_a_configmap_mounts_them(tmp_path: Path) -> None:
    """``config.yaml -> ..data/config.yaml``: the kubelet's ConfigMap layout still reads."""
    data = tmp_path / "..2026_01_01"
    data.mkdir()
    (data / "config.yaml").write_text("interval: 5\n")
    (tmp_path / "..data").symlink_to(data.name)
    (tmp_path / "config.yaml").symlink_to("..data/config.yaml")
    assert load_config(str(tmp_path / "config.yaml"), env={}).interval == 5.0
