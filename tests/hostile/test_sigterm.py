"""SIGTERM wins within 5 s: the real agent process, its first
write stuck on a server that trickles its answer one byte at a time (each byte well
inside any socket timeout, the request deadline set far away), stops within 5 s of
SIGTERM, with one JSON log record per line."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.agent_process import agent_env, agent_process, sigterm
from tests.k8s_api_server import FakeKubeAPI

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"


def test_sigterm_ends_a_trickled_write_within_5_s(tmp_path: Path, k8s_server: FakeKubeAPI) -> None:
    k8s_server.trickle("create", 0.2, 100)
    k8s_server.trickle("patch", 0.2, 100)
    args = [
        "--root", str(FIXTURES / "hgx-h100"),
        "--output", "nodefeature",
        "--kubeconfig", k8s_server.kubeconfig(str(tmp_path / "kubeconfig")),
        "--api-timeout", "120",
        "--log-format", "json", "--no-udev", "--interval", "300",
    ]  # fmt: skip
    with agent_process(args, agent_env(NODE_NAME="node-t", POD_NAMESPACE="nfd")) as proc:
        t0 = time.monotonic()
        while k8s_server.counts["create"] + k8s_server.counts["patch"] == 0:
            assert time.monotonic() - t0 < 30, "agent never wrote"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        time.sleep(0.5)  # the write is now being trickled back
        assert proc.poll() is None
        err, took = sigterm(proc)
    print(f"SIGTERM -> exit: {took:.2f} s")
    assert took < 5.0, f"SIGTERM took {took:.1f} s"
    assert proc.returncode == 0, err
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert any("SIGTERM" in r["msg"] for r in records)
    # the cut-off write is not reported as done
    assert not any(
        r["msg"].startswith(("created NodeFeature", "updated NodeFeature")) for r in records
    )
