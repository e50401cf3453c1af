"""A half-open watch on the real kube-apiserver (issue 34, finding 3).

The agent (its ServiceAccount, the shipped Role with ``watch``, the default 1 h watch
period) reaches the real kube-apiserver through a loopback TCP proxy (tests/netproxy.py;
TLS passes through it untouched). The proxy then stops forwarding every connection open
(a partition, a lost apiserver host, a conntrack drop: the agent's kernel sees nothing
wrong) and the NodeFeature is deleted on the server. Before: not restored for up to an
hour (a read of the watch waited the whole watch; the resync GET was skipped while the
watch "ran"), 0 requests. Now the watch's bookmark deadline (no byte for 130 s before two
bookmarks are seen; kube-apiserver sends one a minute) ends the stream, the watch resumes
on a new connection and sees the deletion: the Node's labels are the scan's again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from nfd_gpu.scan import run_scan
from tests.agent.hostroot_util import copy_fixture
from tests.e2e.cluster import Cluster, Obj, nodefeature_agent_args
from tests.e2e.conftest import NS, Proc, wait_for
from tests.e2e.test_cluster import Agent, node_labels, start_agent
from tests.netproxy import Proxy

__all__ = ["start_agent"]
RESTORE_LIMIT = 200.0  # the 130 s deadline, a back-off step, a pass, nfd-master


def test_half_open_watch_on_the_real_server(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    start_agent: Callable[..., Agent],
    tmp_path: Path,
) -> None:
    node = "e2e-half-open"
    make_node(node)
    kc = yaml.safe_load(Path(agent_sa["kubeconfig"]).read_text())
    server = urlparse(kc["clusters"][0]["cluster"]["server"])
    proxy = Proxy((str(server.hostname), int(server.port or 443)))
    kc["clusters"][0]["cluster"]["server"] = f"https://{server.hostname}:{proxy.port}"
    kubeconfig = tmp_path / "proxied.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kc))
    root = copy_fixture("hgx-h100", str(tmp_path / "root"))
    want = run_scan(root).labels
    path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-{node}"
    try:
        agent = start_agent(
            *nodefeature_agent_args(root, kubeconfig, "--interval", "1"),
            NODE_NAME=node,
            POD_NAMESPACE=NS,
        )

        def why() -> str:
            return f"agent:\n{agent.log()}\nnfd-master:\n{nfd_master.log()}"

        wait_for(lambda: node_labels(kube_cluster, node) == want, 30, why)
        time.sleep(3.0)  # the watch is up
        proxy.freeze()
        kube_cluster.request("DELETE", path)
        t0 = time.monotonic()
        wait_for(lambda: node_labels(kube_cluster, node) != want, 30, why)
        wait_for(lambda: node_labels(kube_cluster, node) == want, RESTORE_LIMIT, why)
        took = time.monotonic() - t0
    finally:
        proxy.stop()
    print(f"\nhalf-open watch on the real kube-apiserver: labels restored in {took:.0f} s")
