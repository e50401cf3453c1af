"""A NodeFeature the real control plane refuses as too large (issue 34, finding 5).

The agent (in process: the real Agent and NodeFeatureSink, the real kubernetes client with
the agent's ServiceAccount token and the shipped Role) publishes a node's labels, then a
complete scan whose feature set is valid but large: one attribute set whose values are
``<`` characters. kube-apiserver stores JSON as Go writes it (``<`` is ``\u003c``, 6
bytes), so the write to etcd is 6 times what the sink sends. The sink counts the object as
Go writes it (``json_size``, checked against the real server's own JSON below) and would
not send it; its limit is lifted here, as for an object that only the server's additions
take over etcd's limit, so that the server's refusal is what is tested. 1,000 entries
(0.3 MiB sent, 1.8 MiB stored) are refused by etcd (``etcdserver: request is too large``,
its ``--max-request-bytes`` 1.5 MiB); 2,000 (0.6 MiB, 3.6 MiB) by kube-apiserver's etcd
client before etcd (``rpc error: code = ResourceExhausted desc = trying to send message
larger than max (3626751 vs. 2097152)``), a 500 the sink retried as transient every pass
before (this test's first run). (An object near 1 MiB of plain keys is stored: the server
drops the managedFields of so large an object.) The fake server
(tests/hostile/test_size_limits.py) only mimics these answers; here they are the real
ones. Checked: ``/readyz`` 503 naming the refusal and what fills the object; one write,
none over the 3 following passes (the same spec is not sent again); the object and the
Node keep the last good labels; a normal scan then publishes, ``/readyz`` 200.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config.loader import Config
from nfd_gpu.features import empty
from nfd_gpu.sinks import Publication, nodefeature
from nfd_gpu.sinks.kubeclient import MAX_OBJECT_BYTES
from nfd_gpu.sinks.nodefeature import NodeFeatureSink, build_api_client
from nfd_gpu.sinks.nodefeature_size import json_size
from tests.e2e.cluster import Cluster, Obj
from tests.e2e.conftest import NS, Proc, wait_for
from tests.e2e.test_cluster import SA_USER, node_labels
from tests.hostile.test_api_faults import FakeResult

VALUE = "<" * 300  # 300 bytes in the sink's JSON, 1,800 in the server's (Go: \u003c)
# entries -> what refuses the write: etcd (over its 1.5 MiB), kube-apiserver's etcd client
# (over its 2 MiB gRPC send limit)
CASES = {1_000: "request is too large", 2_000: "trying to send message larger than max"}
PRESENT = "gpu.feature.node.kubernetes.io/present"
COUNT = "gpu.feature.node.kubernetes.io/count"


class Host:
    def __init__(self) -> None:
        self.result = FakeResult(labels={PRESENT: "true", COUNT: "2"})

    def scan(self, root: str, **_: Any) -> FakeResult:
        return self.result


def _huge(entries: int) -> FakeResult:
    features = empty()
    elements = {f"k{i:06d}": VALUE for i in range(entries)}
    features["attributes"]["gpu.inventory"] = {"elements": elements}
    return FakeResult(labels={PRESENT: "true", COUNT: "3"}, features=features)


@pytest.mark.parametrize("entries", list(CASES), ids=["etcd", "grpc-limit"])
def test_an_object_the_server_refuses_as_too_large_is_not_retried(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    entries: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = f"e2e-too-large-{entries}"
    make_node(node)
    name = f"nfd-gpu-{node}"
    path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/{name}"
    mark = len(kube_cluster.audit_events())

    def writes() -> list[tuple[str, int]]:
        """The agent's requests on its object since the last call (watches aside)."""
        nonlocal mark
        events = kube_cluster.audit_events()
        new, mark = events[mark:], len(events)
        return [
            (e["verb"], e["responseStatus"]["code"])
            for e in new
            if e.get("stage") == "ResponseComplete"
            and e["user"]["username"] == SA_USER
            and e["verb"] != "watch"
            and (e.get("objectRef") or {}).get("name") == name
        ]

    sink = NodeFeatureSink(
        node_name=node, namespace=NS, api_client=build_api_client(str(agent_sa["kubeconfig"])),
        owner_refs=(), rng=random.Random(3),
    )  # fmt: skip
    cfg = Config(interval=1.0, outputs=("nodefeature",), node_name=node, namespace=NS, udev=False)
    host, metrics = Host(), Metrics()
    agent = Agent(cfg, scan=host.scan, sinks=[sink], metrics=metrics)
    good = dict(host.result.labels)
    try:
        assert agent.run_pass()
        assert writes() == [("get", 404), ("create", 201)]
        wait_for(lambda: node_labels(kube_cluster, node) == good, 30, nfd_master.log)

        host.result = _huge(entries)
        want = sink.desired(Publication(host.result.labels, host.result.features))
        size = len(json.dumps(want, separators=(",", ":")))
        assert json_size(want) > MAX_OBJECT_BYTES  # the sink's own count: not sent
        monkeypatch.setattr(nodefeature, "MAX_OBJECT_BYTES", 64 * MAX_OBJECT_BYTES)
        assert not agent.run_pass()
        refused = writes()
        code, body = metrics.readyz()
        for _ in range(3):  # later passes: the same spec is not sent again
            assert not agent.run_pass()
        later = writes()
        code_later, _ = metrics.readyz()
        obj: Obj = kube_cluster.request("GET", path)
        node_now = node_labels(kube_cluster, node)

        host.result = FakeResult(labels={PRESENT: "true", COUNT: "4"})
        assert agent.run_pass()
        recovered = writes()
        ready = metrics.readyz()
    finally:
        sink.close()
        kube_cluster.request("DELETE", path)
    reason = body.decode()
    print(f"\n{size} bytes sent: {refused}, later passes: {later}")
    print(f"/readyz {code}: {reason.strip()}")
    assert len(refused) == 1 and refused[0][0] == "patch", refused
    assert refused[0][1] in (413, 500), refused
    assert later == [], later  # no retry loop
    assert code == 503 and code_later == 503, reason
    assert "as too large" in reason and CASES[entries] in reason, reason
    assert f"{entries} entries" in reason and "attributes gpu.inventory" in reason, reason
    assert obj["spec"]["labels"] == good  # the last good labels stay on the object
    assert node_now == good  # and on the Node
    assert recovered == [("patch", 200)], recovered
    assert ready == (200, b"ok\n"), ready


def test_the_sink_counts_an_object_as_kube_apiserver_writes_it(kube_cluster: Cluster) -> None:
    """``json_size`` of a NodeFeature is the length of the real server's JSON of it.

    Its values hold what Go's encoding/json writes otherwise than Python's ``json``:
    ``<``, ``>``, ``&`` and U+2028 escaped (6 bytes), other non-ASCII text as UTF-8.
    """
    name = "e2e-json-size"
    path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/{name}"
    values = {f"k{i}": v for i, v in enumerate(["a<b>&c", "é ü 日本", "x\u2028y", 'q\n"t'])}
    features = empty()
    features["attributes"]["gpu.text"] = {"elements": values}
    body = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"nfd.node.kubernetes.io/node-name": name},
        },
        "spec": {"labels": {PRESENT: "true"}, "features": features},
    }
    kube_cluster.request("POST", path.rsplit("/", 1)[0], body)
    try:
        text = kube_cluster.request("GET", path, raw=True).rstrip("\n")
    finally:
        kube_cluster.request("DELETE", path)
    assert "\\u003c" in text and "\\u0026" in text  # the server's escapes, as counted
    stored, counted = len(text.encode()), json_size(json.loads(text))
    python = len(json.dumps(json.loads(text), separators=(",", ":")))
    print(f"\nthe server's JSON {stored} bytes, json_size {counted}, Python's json {python}")
    assert counted == stored
