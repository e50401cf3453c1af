"""GPU health to taints on a real control plane: kube-apiserver + NFD's
nfd-master started with ``-enable-taints`` and the shipped rules/gpu-health.yaml. One
failed GPU of two does not taint the node (the device plugin stops handing it out); when
the other fails too (fatal PCIe AER errors on a fixture copy) the node has no GPU left and
gets the NoSchedule taint from nfd-master; when they recover the taint goes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, fixture_root
from tests.e2e.cluster import (
    ApiError,
    Cluster,
    Obj,
    load_yaml_docs,
    nodefeature_agent_args,
    nodefeature_oneshot_args,
)
from tests.e2e.conftest import NS, Proc, wait_for
from tests.e2e.test_cluster import Agent, nfd_gpu, node_labels

G = "gpu.feature.node.kubernetes.io"
TAINT = {"key": f"{G}/unhealthy", "value": "failed", "effect": "NoSchedule"}
AERS = ("sys/devices/pci0000:18/0000:18:00.0/aer_dev_fatal",
        "sys/devices/pci0000:2a/0000:2a:00.0/aer_dev_fatal")  # fmt: skip


def _taints(cluster: Cluster, node: str) -> list[dict[str, str]]:
    spec = cluster.request("GET", f"/api/v1/nodes/{node}").get("spec", {})
    return [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in spec.get("taints", [])]


def test_failed_gpu_taints_node_and_recovery_removes_it(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],  # its namespace (nfd-gpu) holds the NodeFeature
    make_node: Callable[[str], Obj],
    tmp_path: Path,
) -> None:
    (rule,) = list(load_yaml_docs(REPO / "rules" / "gpu-health.yaml"))
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-aer-fatal"), root, symlinks=True)
    node = "e2e-health"
    make_node(node)
    kube_cluster.apply(rule)

    def publish(*fatal: int) -> None:
        for aer, n in zip(AERS, fatal, strict=True):
            (root / aer).write_text(f"Undefined 0\nSDES {n}\nTOTAL_ERR_FATAL {n}\n")
        # as the admin: the agent's service account stays for the tests that audit its requests
        nfd_gpu(*nodefeature_oneshot_args(str(root), node, NS, kube_cluster.admin_kubeconfig))

    def why() -> str:
        return f"taints: {_taints(kube_cluster, node)}\nnfd-master:\n{nfd_master.log()}"

    try:
        publish(0, 0)  # healthy first: labelled, not tainted
        wait_for(lambda: node_labels(kube_cluster, node).get(f"{G}/health") == "ok", 30, why)
        assert TAINT not in _taints(kube_cluster, node)

        publish(1, 0)  # one GPU fails: failed, not tainted (the other is still usable)
        wait_for(lambda: node_labels(kube_cluster, node).get(f"{G}/health") == "failed", 30, why)
        assert TAINT not in _taints(kube_cluster, node)

        publish(1, 1)  # no GPU left: tainted
        wait_for(lambda: TAINT in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health.all-failed"] == "true"

        publish(0, 0)  # they recover: nfd-master takes its taint back
        wait_for(lambda: TAINT not in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health"] == "ok"
    finally:
        with contextlib.suppress(ApiError):
            kube_cluster.request(
                "DELETE",
                f"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/{rule['metadata']['name']}",
            )


def test_agent_started_before_the_driver_catches_a_later_xid_48(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    tmp_path: Path,
) -> None:
    """A running agent (1 s passes) whose pod started before the driver: NVML answers
    ``Driver Not Loaded`` at first, so no health is known; then the driver is up and both
    GPUs report XID 48: the node is tainted within a few passes. The pod restarts (a
    rollout) with nobody having reset the GPUs: the taint stays (the XIDs are read back
    from the NodeFeature; on main the restart forgot them and the taint went). The driver
    is reloaded (each GPU bound again): the GPUs are re-initialised and the taint goes."""
    (rule,) = list(load_yaml_docs(REPO / "rules" / "gpu-health.yaml"))
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-xid-48"), root, symlinks=True)
    rec = json.loads((root / "nvml.json").read_text())
    fired = dict(rec, events=[{"device": i, "type": 8, "data": 48} for i in (0, 1)])
    (root / "nvml.json").write_text(json.dumps(dict(rec, nvmlInit={"error": "DriverNotLoaded"})))
    node = "e2e-health-xid"
    make_node(node)
    kube_cluster.apply(rule)
    args = nodefeature_agent_args(
        str(root), kube_cluster.admin_kubeconfig, "--interval", "1", "--owner-refs", "",
        "--node-name", node, "--namespace", NS,
    )  # fmt: skip
    agents: list[Agent] = []

    def start() -> Agent:
        agents.append(Agent(args, tmp_path / f"agent{len(agents)}.log", {}))
        return agents[-1]

    def why() -> str:
        logs = "\n".join(a.log() for a in agents)
        taints = _taints(kube_cluster, node)
        return f"taints: {taints}\nagents:\n{logs}\nnfd-master:\n{nfd_master.log()}"

    try:
        start()  # before the driver: labelled, no health known, not tainted
        wait_for(lambda: node_labels(kube_cluster, node).get(f"{G}/count") == "2", 30, why)
        assert f"{G}/health" not in node_labels(kube_cluster, node)
        assert TAINT not in _taints(kube_cluster, node)

        (root / "nvml.json").write_text(json.dumps(fired))  # the driver is up; XID 48 x2
        wait_for(lambda: TAINT in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health.all-failed"] == "true"

        agents[-1].stop()  # the pod restarts; the GPUs were not reset
        (root / "nvml.json").write_text(json.dumps(rec))  # a new event set: the XIDs are past
        start()
        held = "held before the agent restarted"
        wait_for(lambda: agents[-1].log().count(held) == 2, 30, why)
        time.sleep(3)  # three passes of the restarted agent
        assert TAINT in _taints(kube_cluster, node), why()
        assert node_labels(kube_cluster, node)[f"{G}/health.all-failed"] == "true"

        for bdf in ("0000:18:00.0", "0000:2a:00.0"):  # the driver reloaded: bound again
            link = root / "sys/bus/pci/devices" / bdf / "driver"
            new = link.with_name("driver.new")
            os.symlink(os.readlink(link), new)
            os.replace(new, link)
        wait_for(lambda: TAINT not in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health"] == "ok"
    finally:
        for a in agents:
            a.stop()
        with contextlib.suppress(ApiError):
            kube_cluster.request(
                "DELETE",
                f"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/{rule['metadata']['name']}",
            )


# Real listings of GPU failures (tests/fixtures/specs/real_health.py), each on its own node
# with a running agent (1 s passes; the XID watcher reads a listing's XID events): the state
# the listing proves and, as each leaves no GPU to use, the taint from nfd-master.
REAL_FAILURES = {
    "real-rtx3090-rminit": "failed",  # RmInitAdapter failed, No devices were found
    "real-rtx5090-rminit": "failed",  # the same on an RTX 5090 (10de:2b85)
    "real-titanv-rminit": "failed",  # the same on a Titan V
    "real-rtx5080-xid79": "failed",  # XID 79 (fallen off the bus), then XID 154
    "real-k40m-aer-xid79": "failed",  # Surprise Down on the port above, then XID 79
    "real-a100-xid94": "failed",  # XID 48/171 (DBE), 63 (row remap), 94 (contained ECC), 154
}


@pytest.mark.parametrize("fixture", sorted(REAL_FAILURES))
def test_real_failure_listing_taints_node(
    fixture: str,
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    tmp_path: Path,
) -> None:
    (rule,) = list(load_yaml_docs(REPO / "rules" / "gpu-health.yaml"))
    root = tmp_path / "root"
    shutil.copytree(fixture_root(fixture), root, symlinks=True)
    node = f"e2e-{fixture}"
    make_node(node)
    kube_cluster.apply(rule)
    args = nodefeature_agent_args(
        str(root), kube_cluster.admin_kubeconfig, "--interval", "1", "--owner-refs", "",
        "--node-name", node, "--namespace", NS,
    )  # fmt: skip
    agent = Agent(args, tmp_path / "agent.log", {})

    def why() -> str:
        return f"taints: {_taints(kube_cluster, node)}\nagent:\n{agent.log()}"

    try:
        wait_for(lambda: TAINT in _taints(kube_cluster, node), 30, why)
        got = node_labels(kube_cluster, node)
        assert got[f"{G}/health"] == REAL_FAILURES[fixture]
        assert got[f"{G}/health.all-failed"] == "true"
    finally:
        agent.stop()
        with contextlib.suppress(ApiError):
            kube_cluster.request(
                "DELETE",
                f"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/{rule['metadata']['name']}",
            )
