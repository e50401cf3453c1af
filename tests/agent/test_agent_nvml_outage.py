"""The agent keeps the last NVML facts while NVML is away.

A real ``nfd-gpu run`` subprocess on the H200 capture without its recording, with an
importable fake ``pynvml`` (tests/fake_pynvml.py: the recorded H200 answers) that goes away
while a flag file exists. Labels are read back from the NodeFeature object on the test API
server; the warning from the JSON log; the metric by scraping /metrics.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from tests.agent.test_agent_subprocess import NS, OBJ, AgentProcess, http_get, metric, wait_for
from tests.fake_pynvml import library_env, write_fake_pynvml
from tests.k8s_api_server import FakeKubeAPI

TESTS = Path(__file__).resolve().parent.parent

H200 = TESTS / "fixtures" / "sysfs" / "h200-vm"
G = "gpu.feature.node.kubernetes.io"


def test_nvml_outage_keeps_labels_and_says_so(tmp_path: Path, k8s_server: FakeKubeAPI) -> None:
    root = tmp_path / "root"
    shutil.copytree(H200, root, symlinks=True)
    (root / "nvml.json").unlink()
    flag = tmp_path / "nvml-down"
    lib = write_fake_pynvml(tmp_path / "lib", H200 / "nvml.json", outage=flag)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NFD_GPU_", "POD_", "NODE_", "KUBE"))
    }
    env.update(POD_NAMESPACE=NS, NODE_NAME="node-a")
    env["PYTHONPATH"] = os.pathsep.join([str(lib), os.getcwd(), env.get("PYTHONPATH", "")])
    env = library_env(lib, env)  # its libnvidia-ml.so.1 opens, as nvmlInit needs
    args = [
        "--root", str(root), "--output", "nodefeature", "--owner-refs", "",
        "--kubeconfig", k8s_server.kubeconfig(str(tmp_path / "kubeconfig")),
        "--metrics-address", "127.0.0.1:0", "--log-format", "json", "--no-udev",
        "--interval", "0.2",
    ]  # fmt: skip
    agent = AgentProcess(args, env)

    def labels() -> dict[str, str]:
        obj = k8s_server.get(NS, OBJ)
        return {} if obj is None else dict(obj["spec"]["labels"])

    def scrape(name: str, **lab: str) -> float:
        return metric(http_get(url + "/metrics")[1], name, **lab)

    try:
        url = agent.metrics_url()
        wait_for(lambda: labels().get(f"{G}/mig.enabled") == "false", 20, agent.log)
        before = labels()
        assert before[f"{G}/virtualization"] == "passthrough"  # NVML facts, from the fake
        assert scrape("nfd_gpu_nvml_stale") == 0
        assert scrape("nfd_gpu_nvml_source", source="nvml") == 1
        writes = k8s_server.writes()

        flag.touch()  # NVML goes away
        wait_for(lambda: scrape("nfd_gpu_nvml_stale") == 1, 10, agent.log)
        time.sleep(1.0)  # several passes during the outage
        assert labels() == before
        assert k8s_server.writes() == writes  # nothing rewritten
        warned = [
            json.loads(line)["msg"] for line in agent.lines if "keeping the last NVML" in line
        ]
        assert warned and "same GPUs and driver" in warned[0], agent.log()
        said = "NVIDIA facts from: stale (nvmlInit: Driver Not Loaded)"
        assert any(said in line for line in agent.lines), agent.log()

        flag.unlink()  # NVML is back: initialised again, fresh facts, not stale
        wait_for(lambda: scrape("nfd_gpu_nvml_source", source="nvml") == 1, 10, agent.log)
        assert scrape("nfd_gpu_nvml_stale") == 0
        assert labels() == before
        assert k8s_server.writes() == writes
    finally:
        agent.kill()


def test_nvml_outage_with_other_gpus_is_not_masked(tmp_path: Path) -> None:
    """The cache only stands for the same GPUs and driver: another driver version in procfs
    means the kept facts are dropped (procfs facts, no stale)."""
    from nfd_gpu.discovery.nvidia.session import NvmlSession
    from nfd_gpu.scan import run_scan

    root = tmp_path / "root"
    shutil.copytree(H200, root, symlinks=True)
    (root / "nvml.json").unlink()
    flag = tmp_path / "down"
    lib_dir = write_fake_pynvml(tmp_path / "lib", H200 / "nvml.json", outage=flag)
    sys.path.insert(0, str(lib_dir))
    sys.modules.pop("pynvml", None)
    # imported here: this process cannot open the fake's libnvidia-ml.so.1 (its library
    # path was read at start), and an imported pynvml is asked without that check
    importlib.import_module("pynvml")
    try:
        session = NvmlSession("auto", keep=True)
        first = run_scan(root, nvml=session).labels
        assert session.status == "nvml"
        flag.touch()
        assert run_scan(root, nvml=session).labels == first
        assert session.status == "stale"
        version = root / "proc/driver/nvidia/version"
        version.write_text(version.read_text().replace("580.159.04", "580.200.01"))
        (root / "sys/module/nvidia/version").write_text("580.200.01\n")
        again = run_scan(root, nvml=session)
        assert session.status == "procfs"
        assert f"{G}/mig.enabled" not in again.labels
        assert again.labels[f"{G}/nvidia.driver.version"] == "580.200.01"
        session.close()
    finally:
        sys.path.remove(str(lib_dir))
        sys.modules.pop("pynvml", None)
