"""Damaged and hostile host trees: every case ends in < 5 s and < 200 MB (``bounded``),
raises nothing, reads nothing outside the root."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nfd_gpu.host import HostRoot
from nfd_gpu.scan import run_scan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
SECRET = "TOP-SECRET-OUTSIDE-THE-ROOT"


def _copy(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(FIXTURES / name, root, symlinks=True)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    p = tmp_path / "outside-secret"
    p.write_text(SECRET + "\n")
    return p


# -- links leaving the root -------------------------------------------------------------


@pytest.mark.parametrize("how", ["absolute", "climbing"])
def test_product_name_link_out_of_root_is_not_followed(
    tmp_path: Path, outside: Path, resolver: object, bounded: None, how: str
) -> None:
    root = _copy("hgx-h100", tmp_path)
    pn = root / "sys/class/dmi/id/product_name"
    pn.unlink()
    target = str(outside) if how == "absolute" else "../" * 40 + str(outside).lstrip("/")
    os.symlink(target, pn)
    res = run_scan(root, profiles=("neutral", "nvidia"))
    dump = json.dumps([res.labels, res.features, res.warnings, res.snapshot.to_dict()])
    assert SECRET not in dump
    assert "dangling symbolic link" in " ".join(res.warnings)
    assert res.complete


def test_absolute_link_is_rerooted(tmp_path: Path, outside: Path, resolver: object) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/inside").write_text("inside\n")
    (tmp_path / "sys").mkdir()
    os.symlink("/etc/inside", tmp_path / "sys/a")
    os.symlink(str(outside.parent), tmp_path / "sys/dir")
    h = HostRoot(tmp_path)
    assert h.read_text("sys/a") == "inside"
    assert h.listdir("sys/dir") == []  # <root>/<tmp path> does not exist
    assert h.read_text(f"sys/dir/{outside.name}") is None
    assert not h.exists(f"sys/dir/{outside.name}")


def test_kernel_relative_links_still_resolve(tmp_path: Path, resolver: object) -> None:
    root = _copy("hgx-h100", tmp_path)
    plain = run_scan(FIXTURES / "hgx-h100", profiles=("neutral", "nvidia"))
    confined = run_scan(root, profiles=("neutral", "nvidia"))
    assert confined.labels == plain.labels and confined.labels
    assert confined.features == plain.features


# -- counts read from the host -----------------------------------------------------------


@pytest.mark.parametrize("numvfs", ["1000000", "1000000000000", "99999999999999999999999"])
def test_sriov_numvfs_is_bounded(tmp_path: Path, bounded: None, numvfs: str) -> None:
    root = _copy("hgx-h100", tmp_path)
    dev = sorted((root / "sys/bus/pci/devices").iterdir())[0]
    (dev / "sriov_totalvfs").write_text(numvfs + "\n")
    (dev / "sriov_numvfs").write_text(numvfs + "\n")
    res = run_scan(root)
    assert any("exceeds" in w for w in res.warnings)
    assert res.complete


def test_numvfs_beyond_totalvfs(tmp_path: Path, bounded: None) -> None:
    root = _copy("hgx-h100", tmp_path)
    dev = sorted((root / "sys/bus/pci/devices").iterdir())[0]
    (dev / "sriov_totalvfs").write_text("4\n")
    (dev / "sriov_numvfs").write_text("1000000000\n")
    res = run_scan(root)
    assert f"/sys/bus/pci/devices/{dev.name}/sriov_numvfs: 1000000000 exceeds sriov_totalvfs 4" in (
        res.warnings
    )


# -- a local error is not a result -------------------------------------------------------


@contextlib.contextmanager
def _no_descriptor_left() -> Iterator[None]:
    """Inside: every file descriptor of the process is taken (a limit of 64, all held),
    so the next ``open`` fails with EMFILE; the limit and the descriptors are given back."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as e:
            assert e.errno == errno.EMFILE
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_emfile_makes_the_scan_incomplete(tmp_path: Path, bounded: None) -> None:
    """Out of descriptors while listing the PCI devices: an error, not 'no GPU'."""
    root = FIXTURES / "hgx-h100"
    with _no_descriptor_left():
        res = run_scan(root)
    assert not res.complete
    assert any("Too many open files" in e for e in res.errors)


def test_failed_listing_makes_the_scan_incomplete() -> None:
    """The PCI device listing fails (EACCES): the scan is incomplete, not "no GPU".

    Root reads through mode 000, so as root (CI) the scan runs in a forked child that
    has dropped to uid/gid 65534 first.
    """
    tmp = Path(tempfile.mkdtemp(prefix="nfd-gpu-unlistable-"))
    try:
        tmp.chmod(0o755)
        root = _copy("hgx-h100", tmp)
        d = root / "sys/bus/pci/devices"
        d.chmod(0)
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            code = 1
            try:
                os.close(rd)
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                res = run_scan(root)
                os.write(wr, json.dumps({"complete": res.complete, "errors": res.errors}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(wr)
        with os.fdopen(rd, "rb") as f:
            answer = f.read()
        _, status = os.waitpid(pid, 0)
        d.chmod(0o755)
        assert os.waitstatus_to_exitcode(status) == 0, "the scan raised in the child"
        got = json.loads(answer)
        assert got["complete"] is False
        assert any("Permission denied" in e for e in got["errors"]), got["errors"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_metrics_port_flood_leaves_descriptors_for_the_scan(bounded: None) -> None:
    """1,025 idle connections to the metrics port: the server holds at most
    MAX_CONNECTIONS of them, drops the rest, and a scan still completes."""
    from nfd_gpu.agent.httpserve import MAX_CONNECTIONS
    from nfd_gpu.agent.metrics import Metrics, MetricsServer

    m = Metrics()
    srv = MetricsServer(m, "127.0.0.1", 0).start()
    host, port = srv.address
    socks = []
    # this server's handler threads only: a test run before may leave its own behind
    others = set(threading.enumerate())
    try:
        fds_before = len(os.listdir("/proc/self/fd"))
        for _ in range(1025):
            s = socket.socket()
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                s.connect((host, port))
            socks.append(s)
        time.sleep(0.5)
        threads = [
            t for t in threading.enumerate() if "process_request" in t.name and t not in others
        ]
        assert len(threads) <= MAX_CONNECTIONS
        # our 1,025 client sockets + at most MAX_CONNECTIONS server-side ones (+ slack)
        grew = len(os.listdir("/proc/self/fd")) - fds_before
        assert grew <= 1025 + MAX_CONNECTIONS + 4
        res = run_scan(FIXTURES / "hgx-h100")
        assert res.complete and res.labels
    finally:
        for s in socks:
            s.close()
        srv.stop()


def test_agent_keeps_last_good_labels_after_emfile(tmp_path: Path, bounded: None) -> None:
    """The agent end to end (real scan, real feature-file sink): a pass that runs out
    of descriptors leaves the feature file as the last good pass wrote it."""
    from nfd_gpu.agent import Agent
    from nfd_gpu.agent.metrics import Metrics
    from nfd_gpu.config.loader import Config

    out = tmp_path / "features.d"
    cfg = Config(root=str(FIXTURES / "hgx-h100"), features_dir=str(out), udev=False)
    m = Metrics()
    agent = Agent(cfg, metrics=m)
    assert agent.run_pass()
    good = (out / "nfd-gpu").read_text()
    assert "present=true" in good
    with _no_descriptor_left():
        ok = agent.run_pass()
    assert not ok
    assert (out / "nfd-gpu").read_text() == good
    assert not m.ready.is_set() and "incomplete" in m.not_ready_reason
    assert b'nfd_gpu_scans_total{result="incomplete"} 1.0' in m.exposition()


def test_json_logs_keep_tracebacks_inside_records(tmp_path: Path) -> None:
    """--log-format json: a scan that raises is one JSON line with the traceback in it."""
    code = (
        "import sys, logging\n"
        "from nfd_gpu.agent import Agent, setup_logging\n"
        "from nfd_gpu.config.loader import Config\n"
        "setup_logging('json')\n"
        "def boom(root, **kw):\n"
        "    raise RecursionError('deep')\n"
        f"a = Agent(Config(features_dir={str(tmp_path)!r}, udev=False), scan=boom)\n"
        "a.run_pass()\n"
        "import threading\n"
        "t = threading.Thread(target=lambda: 1 / 0); t.start(); t.join()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines
    docs = [json.loads(ln) for ln in lines]  # every line is a JSON record
    assert any("RecursionError" in d.get("exc", "") for d in docs)
    assert any("ZeroDivisionError" in d.get("exc", "") for d in docs)
