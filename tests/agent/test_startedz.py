"""``/startedz``, the manifests' startup probe: 503 until the agent's first pass has ended,
then 200 whatever that pass's outcome. So a never-ready agent (a scan that fails, a
refusing sink) is not restarted by it: ``/readyz`` says why it is not ready."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics, MetricsServer
from nfd_gpu.config.loader import Config
from nfd_gpu.scan import run_scan

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "hgx-h100"


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _served(tmp_path: Path, scan: object) -> tuple[Agent, MetricsServer]:
    cfg = Config(root=str(ROOT), outputs=("featurefile",), features_dir=str(tmp_path))
    metrics = Metrics()
    return Agent(cfg, scan=scan, metrics=metrics), MetricsServer(metrics, "127.0.0.1", 0).start()


def test_started_once_the_first_pass_ends(tmp_path: Path) -> None:
    agent, srv = _served(tmp_path, None)
    try:
        port = srv.address[1]
        assert _get(port, "/startedz") == (503, b"first pass not ended\n")
        assert _get(port, "/readyz")[0] == 503
        assert agent.run_pass()
        assert _get(port, "/startedz") == (200, b"ok\n")
        assert _get(port, "/readyz")[0] == 200
    finally:
        srv.stop()


def test_a_failed_first_pass_is_started_not_ready(tmp_path: Path) -> None:
    def broken(root: str, **kwargs: object) -> object:
        raise MemoryError("no memory")

    agent, srv = _served(tmp_path, broken)
    try:
        port = srv.address[1]
        assert not agent.run_pass()
        assert _get(port, "/startedz") == (200, b"ok\n")  # not restarted for it
        code, body = _get(port, "/readyz")
        assert code == 503 and b"scan failed" in body, body
    finally:
        srv.stop()


def test_started_stays_after_later_passes(tmp_path: Path) -> None:
    passes = iter([run_scan, None])

    def scan(root: str, **kwargs: object) -> object:
        fn = next(passes)
        if fn is None:
            raise RuntimeError("a later pass fails")
        return fn(root, **kwargs)

    agent, srv = _served(tmp_path, scan)
    try:
        port = srv.address[1]
        assert agent.run_pass()
        assert not agent.run_pass()
        assert _get(port, "/startedz")[0] == 200
        assert _get(port, "/readyz")[0] == 503
    finally:
        srv.stop()
