"""The agent's removal of a NodeFeature an earlier ``nodefeature`` output left
(``nfd_gpu/sinks/nodefeature_stale.py``, ``remove_stale``) on the real kube-apiserver:
removed when it is this node's and the credentials allow it; left, with one line saying
why and what to run, when they do not (the nodefeature-api overlay's Role has no
``delete``) or when the object is labelled for another node. The chart's own path (its
get/delete Role, the admission policy) is in test_helm_lifecycle.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL
from tests.conftest import fixture_root, nfd_gpu_cmd
from tests.e2e.cluster import ApiError, Cluster
from tests.e2e.conftest import NS
from tests.e2e.test_cluster import agent_env

BASE = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures"


def nodefeature(cluster: Cluster, node: str, label_node: str) -> None:
    cluster.request(
        "POST",
        BASE,
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {"name": f"nfd-gpu-{node}", "labels": {NODE_NAME_LABEL: label_node}},
            "spec": {"labels": {"gpu.feature.node.kubernetes.io/present": "true"}},
        },
    )


def featurefile_run(node: str, kubeconfig: Path, work: Path) -> str:
    p = subprocess.run(
        [*nfd_gpu_cmd(), "run", "--oneshot", "--output", "featurefile", "--no-udev",
         "--root", str(fixture_root("hgx-h100")), "--features-dir", str(work),
         "--node-name", node, "--namespace", NS, "--kubeconfig", str(kubeconfig),
         "--log-format", "text"],
        capture_output=True, text=True, env=agent_env(), timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stderr


def exists(cluster: Cluster, node: str) -> bool:
    try:
        cluster.request("GET", f"{BASE}/nfd-gpu-{node}")
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    return True


@pytest.mark.parametrize(
    "case, label_node, creds, kept, line",
    [
        ("ours", "stale-ours", "admin", False, "removed NodeFeature nfd-gpu/nfd-gpu-stale-ours"),
        ("other", "someone-else", "admin", True, "not ours: left"),
        ("no-delete", "stale-no-delete", "agent", True,
         "not removed (403 Forbidden); if it is stale: kubectl -n nfd-gpu delete nodefeature "
         "nfd-gpu-stale-no-delete"),
    ],
)  # fmt: skip
def test_stale_nodefeature_removed_only_when_ours_and_allowed(
    case: str,
    label_node: str,
    creds: str,
    kept: bool,
    line: str,
    kube_cluster: Cluster,
    agent_sa: dict[str, Any],
    tmp_path: Path,
) -> None:
    node = {"other": "stale-other"}.get(case, label_node)
    nodefeature(kube_cluster, node, label_node)
    kubeconfig = kube_cluster.admin_kubeconfig if creds == "admin" else agent_sa["kubeconfig"]
    try:
        log = featurefile_run(node, kubeconfig, tmp_path)
        assert line in log, log
        assert exists(kube_cluster, node) == kept, log
        # the feature file is written either way
        assert (tmp_path / "nfd-gpu").is_file()
    finally:
        if exists(kube_cluster, node):
            kube_cluster.request("DELETE", f"{BASE}/nfd-gpu-{node}")
