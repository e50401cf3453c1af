"""Acceptance: ``nfd-gpu run`` as a subprocess on a fixture root against the test API server."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from nfd_gpu import __version__
from nfd_gpu.scan import run_scan
from tests.agent.hostroot_util import add_gpu, copy_fixture, remove_gpu
from tests.conftest import no_nvml_dir as _no_nvml_dir
from tests.k8s_api_server import FakeKubeAPI
from tests.sinks.nfd_local_parser import parse_features_dir


def no_nvml_dir() -> str:
    return str(_no_nvml_dir())


HERE = os.path.dirname(os.path.abspath(__file__))
NS = "nfd-gpu"
OBJ = "nfd-gpu-node-a"
COUNT = "gpu.feature.node.kubernetes.io/count"


class AgentProcess:
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nfd_gpu.cli", "run", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def log(self) -> str:
        return "".join(self.lines)

    def metrics_url(self, timeout: float = 20) -> str:
        def find() -> str | None:
            for line in list(self.lines):
                m = re.search(r"metrics listening on (http://[0-9.:]+)/metrics", line)
                if m:
                    return m.group(1)
            return None

        url = wait_for(find, timeout, lambda: self.log())
        assert url is not None
        return url

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def wait_for(cond: Callable[[], Any], timeout: float, why: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out; agent log:\n{why()}")


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if got == labels:
            return float(m.group(3))
    raise KeyError(f"{name}{labels} not in metrics")


def obj_count(api: FakeKubeAPI) -> str | None:
    obj = api.get(NS, OBJ)
    return None if obj is None else obj["spec"]["labels"].get(COUNT)


@pytest.fixture
def agent_env(tmp_path: Any, k8s_server: FakeKubeAPI) -> dict[str, Any]:
    root = copy_fixture("hgx-h100", str(tmp_path / "root"))
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "ds-1"}
    k8s_server.add_pod(NS, "nfd-gpu-x1", "pod-1", [ds])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NFD_GPU_", "POD_", "NODE_", "KUBE"))
    }
    env.update(POD_NAME="nfd-gpu-x1", POD_UID="pod-1", POD_NAMESPACE=NS, NODE_NAME="node-a")
    env["PYTHONPATH"] = os.pathsep.join([no_nvml_dir(), os.getcwd(), env.get("PYTHONPATH", "")])
    args = [
        "--root", root,
        "--output", "nodefeature", "--output", "featurefile",
        "--features-dir", str(tmp_path / "features.d"),
        "--kubeconfig", k8s_server.kubeconfig(str(tmp_path / "kubeconfig")),
        "--metrics-address", "127.0.0.1:0",
        "--log-format", "json", "--no-udev",
    ]  # fmt: skip
    return {"root": root, "env": env, "args": args, "fd": str(tmp_path / "features.d")}


def test_agent_publishes_once_survives_faults_and_stops(
    agent_env: dict[str, Any], k8s_server: FakeKubeAPI
) -> None:
    root = agent_env["root"]
    agent = AgentProcess([*agent_env["args"], "--interval", "0.2"], agent_env["env"])
    try:
        url = agent.metrics_url()
        wait_for(lambda: http_get(url + "/readyz")[0] == 200, 20, agent.log)
        assert http_get(url + "/healthz")[0] == 200
        # unchanged passes: no further requests at all
        time.sleep(1.5)
        assert k8s_server.counts == {"get-pod": 1, "get": 1, "create": 1, "watch": 1}, agent.log()
        obj = k8s_server.get(NS, OBJ)
        assert obj is not None and obj["spec"]["labels"] == run_scan(root).labels
        assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Pod", "DaemonSet"]
        assert obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == "node-a"

        # a GPU is added: the next interval publishes exactly one replace
        add_gpu(root, "0000:18:00.0", "0000:f0:00.0")
        wait_for(lambda: obj_count(k8s_server) == "9", 10, agent.log)
        time.sleep(1.0)
        assert k8s_server.counts["patch"] == 1
        assert k8s_server.writes() == 2

        # faults: a 500 on the next write and a concurrent writer (stale resourceVersion -> 409)
        k8s_server.fail("patch", 500)
        k8s_server.bump(NS, OBJ)
        remove_gpu(root, "0000:f0:00.0")
        wait_for(lambda: obj_count(k8s_server) == "8", 15, agent.log)
        assert agent.proc.poll() is None
        # 500, then 409, then the successful PUT
        assert k8s_server.counts["patch"] == 4, k8s_server.counts
        assert k8s_server.rejected == []

        def written() -> bool:
            text = http_get(url + "/metrics")[1]
            return metric(text, "nfd_gpu_publish_total", result="written", sink="nodefeature") == 3

        wait_for(written, 5, agent.log)
        text = http_get(url + "/metrics")[1]
        assert metric(text, "nfd_gpu_publish_total", result="error", sink="nodefeature") == 1
        assert metric(text, "nfd_gpu_publish_total", result="unchanged", sink="nodefeature") >= 5
        assert metric(text, "nfd_gpu_gpus", vendor="nvidia") == 8
        assert metric(text, "nfd_gpu_labels") == len(run_scan(root).labels)
        assert metric(text, "nfd_gpu_scans_total", result="ok") >= 8
        assert metric(text, "nfd_gpu_scan_duration_seconds_count") >= 8
        assert metric(text, "nfd_gpu_build_info", version=__version__) == 1
        assert metric(text, "nfd_gpu_last_publish_timestamp_seconds") > time.time() - 60
        assert metric(text, "nfd_gpu_warnings") == 0

        t0 = time.monotonic()
        agent.proc.send_signal(signal.SIGTERM)
        rc = agent.proc.wait(10)
        elapsed = time.monotonic() - t0
        assert rc == 0, agent.log()
        assert elapsed < 5
        # the feature file is kept on exit and reads back as exactly the labels
        labels, _ = parse_features_dir(agent_env["fd"], _now())
        assert labels == run_scan(root).labels
        assert k8s_server.get(NS, OBJ) is not None  # never deleted on exit
        for line in agent.lines:
            json.loads(line)  # --log-format json: every stderr line is a JSON document
    finally:
        agent.kill()


def test_sighup_triggers_a_pass_at_once(agent_env: dict[str, Any], k8s_server: FakeKubeAPI) -> None:
    root = agent_env["root"]
    agent = AgentProcess([*agent_env["args"], "--interval", "300"], agent_env["env"])
    try:
        url = agent.metrics_url()
        wait_for(lambda: http_get(url + "/readyz")[0] == 200, 20, agent.log)
        add_gpu(root, "0000:18:00.0", "0000:f0:00.0")
        time.sleep(0.5)
        assert obj_count(k8s_server) == "8"  # 300 s interval: nothing yet
        agent.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: obj_count(k8s_server) == "9", 10, agent.log)
        assert k8s_server.counts["patch"] == 1
        t0 = time.monotonic()
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.proc.wait(10) == 0
        assert time.monotonic() - t0 < 5
    finally:
        agent.kill()


def test_bad_config_is_one_line_exit_2(tmp_path: Any) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("interval: soon\n")
    proc = subprocess.run(
        [sys.executable, "-m", "nfd_gpu.cli", "run", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"nfd-gpu: error: {cfg}: interval: expected a number, got 'soon'"
    ]


def _now() -> Any:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc)
