"""GPU health to taints on a real control plane: kube-apiserver + NFD's
nfd-master started with ``-enable-taints`` and the shipped rules/gpu-health.yaml. A node
whose GPU fails (a fatal PCIe AER error on a fixture copy) gets the NoSchedule taint from
nfd-master; when the GPU recovers (the counter is clear again), the taint goes."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import REPO, fixture_root
from tests.e2e.cluster import ApiError, Cluster, Obj, load_yaml_docs, nodefeature_oneshot_args
from tests.e2e.conftest import NS, Proc, wait_for
from tests.e2e.test_cluster import nfd_gpu, node_labels

G = "gpu.feature.node.kubernetes.io"
TAINT = {"key": f"{G}/unhealthy", "value": "failed", "effect": "NoSchedule"}
AER = "sys/devices/pci0000:18/0000:18:00.0/aer_dev_fatal"


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

    def publish(fatal: int) -> None:
        (root / AER).write_text(f"Undefined 0\nSDES {fatal}\nTOTAL_ERR_FATAL {fatal}\n")
        # as the admin: the agent's service account stays for the tests that audit its requests
        nfd_gpu(*nodefeature_oneshot_args(str(root), node, NS, kube_cluster.admin_kubeconfig))

    def why() -> str:
        return f"taints: {_taints(kube_cluster, node)}\nnfd-master:\n{nfd_master.log()}"

    try:
        publish(0)  # healthy first: labelled, not tainted
        wait_for(lambda: node_labels(kube_cluster, node).get(f"{G}/health") == "ok", 30, why)
        assert TAINT not in _taints(kube_cluster, node)

        publish(1)  # the GPU fails
        wait_for(lambda: TAINT in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health"] == "failed"

        publish(0)  # it recovers: nfd-master takes its taint back
        wait_for(lambda: TAINT not in _taints(kube_cluster, node), 30, why)
        assert node_labels(kube_cluster, node)[f"{G}/health"] == "ok"
    finally:
        with contextlib.suppress(ApiError):
            kube_cluster.request(
                "DELETE",
                f"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/{rule['metadata']['name']}",
            )
