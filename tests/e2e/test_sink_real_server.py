"""The NodeFeature sink (real kubernetes client) against the real kube-apiserver.

Every behaviour a real server can show is checked here, with the agent's ServiceAccount
token bound to the shipped Role; requests are counted from the server's audit log.
``tests/sinks/test_sink_nodefeature.py`` keeps, on the Python fake, only what a real
server cannot be made to do on demand (5xx answers, slow answers, endless conflicts).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL, NodeFeatureSink, build_api_client
from tests.e2e.cluster import ApiError, Cluster, Obj, daemonset_pod
from tests.e2e.conftest import NS
from tests.sinks.publications import Clock, pub

SA_USER = f"system:serviceaccount:{NS}:nfd-gpu"
COUNT = "gpu.feature.node.kubernetes.io/count"


class Env:
    """One test's node name, sink factory and view of the server."""

    def __init__(self, cluster: Cluster, kubeconfig: Path, node: str) -> None:
        self.cluster = cluster
        self.kubeconfig = kubeconfig
        self.node = node
        self.name = f"nfd-gpu-{node}"
        self.path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/{self.name}"
        self._mark = len(cluster.audit_events())
        self.sinks: list[NodeFeatureSink] = []

    def sink(self, clock: Clock | None = None, kubeconfig: Path | None = None, **kw: Any) -> Any:
        self.sinks.append(self._sink(clock, kubeconfig, **kw))
        return self.sinks[-1]

    def _sink(self, clock: Clock | None, kubeconfig: Path | None, **kw: Any) -> NodeFeatureSink:
        return NodeFeatureSink(
            node_name=self.node,
            namespace=NS,
            api_client=build_api_client(str(kubeconfig or self.kubeconfig)),
            clock=clock or Clock(),
            sleep=lambda s: None,
            rng=random.Random(1),
            **kw,
        )

    def get(self) -> Obj | None:
        try:
            obj: Obj = self.cluster.request("GET", self.path)
            return obj
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def calls(self, user: str = SA_USER) -> list[tuple[str, str, int]]:
        """(verb, resource, status) of the agent's requests since the last call; watches
        aside (audited when they end, e.g. an earlier test's, closed at its teardown; their
        cost is tests/e2e/test_own_object.py's)."""
        events = self.cluster.audit_events()
        new, self._mark = events[self._mark :], len(events)
        return [
            (e["verb"], e["objectRef"]["resource"], e["responseStatus"]["code"])
            for e in new
            if e.get("stage") == "ResponseComplete"
            and e["user"]["username"] == user
            and e["verb"] != "watch"
        ]


@pytest.fixture
def env(
    kube_cluster: Cluster, agent_sa: dict[str, Any], request: pytest.FixtureRequest
) -> Iterator[Env]:
    node = "sink-" + request.node.name.removeprefix("test_").replace("_", "-")[:40]
    e = Env(kube_cluster, agent_sa["kubeconfig"], node)
    yield e
    for sink in e.sinks:
        sink.close()  # its watch
    if e.get() is not None:
        kube_cluster.request("DELETE", e.path)


def test_create_then_no_requests_when_unchanged(env: Env) -> None:
    sink = env.sink()
    assert sink.publish(pub()) is True
    assert env.calls() == [("get", "nodefeatures", 404), ("create", "nodefeatures", 201)]
    obj = env.get()
    assert obj is not None
    assert obj["metadata"]["labels"][NODE_NAME_LABEL] == env.node
    assert obj["spec"]["labels"] == pub().labels
    assert obj["spec"]["features"] == pub().features
    for _ in range(5):
        assert sink.publish(pub()) is False
    assert env.calls() == []


def test_change_is_one_patch(env: Env) -> None:
    sink = env.sink()
    sink.publish(pub(8))
    env.calls()
    assert sink.publish(pub(9)) is True
    assert env.calls() == [("patch", "nodefeatures", 200)]
    obj = env.get()
    assert obj is not None and obj["spec"]["labels"][COUNT] == "9"
    assert len(obj["spec"]["features"]["instances"]["gpu.device"]["elements"]) == 9


def test_patch_removes_what_is_gone_and_keeps_foreign_metadata(env: Env) -> None:
    """The merge patch's nulls: a label and a feature set gone from the publication are
    gone from the server's object, whose spec is then exactly the one published."""
    sink = env.sink()
    sink.publish(pub(8))
    obj = env.get()
    assert obj is not None
    obj["metadata"].setdefault("annotations", {})["someone/else"] = "was-here"
    env.cluster.request("PUT", env.path, obj)  # seen by the re-read below (no watch yet)
    smaller = pub(8)
    del smaller.labels["gpu.feature.node.kubernetes.io/present"]
    del smaller.features["flags"]["gpu.capability"]
    sink2 = env.sink(watch=False)  # a fresh sink: it reads the object first
    env.calls()
    assert sink2.publish(smaller) is True
    assert env.calls() == [("get", "nodefeatures", 200), ("patch", "nodefeatures", 200)]
    obj = env.get()
    assert obj is not None
    assert obj["spec"]["labels"] == smaller.labels
    assert obj["spec"]["features"] == smaller.features
    assert obj["metadata"]["annotations"]["someone/else"] == "was-here"
    assert obj["metadata"]["labels"][NODE_NAME_LABEL] == env.node


def test_a_role_without_patch_writes_with_update(env: Env, tmp_path: Path) -> None:
    """An older release's Role (get, create, update, watch): the first patch is refused,
    said once, and every write is then a PUT."""
    kubeconfig = _account(env.cluster, tmp_path, "no-patch", ["get", "create", "update", "watch"])
    try:
        sink = env.sink(kubeconfig=kubeconfig)
        sink.publish(pub(8))
        env.calls()
        assert sink.publish(pub(9)) is True
        user = f"system:serviceaccount:{NS}:no-patch"
        want = [("patch", "nodefeatures", 403), ("update", "nodefeatures", 200)]
        assert env.calls(user) == want
        assert sink.publish(pub(10)) is True
        assert env.calls(user) == [("update", "nodefeatures", 200)]
        obj = env.get()
        assert obj is not None and obj["spec"]["labels"][COUNT] == "10"
    finally:
        _drop_account(env.cluster, "no-patch")


def test_concurrent_writer_conflict_is_retried_with_fresh_resource_version(env: Env) -> None:
    # without the watch (a Role without 'watch'): the foreign write is found by the 409
    sink = env.sink(watch=False)
    sink.publish(pub(8))
    # someone else writes the object: its resourceVersion moves on
    obj = env.get()
    assert obj is not None
    obj["metadata"].setdefault("annotations", {})["someone/else"] = "was-here"
    env.cluster.request("PUT", env.path, obj)
    env.calls()
    assert sink.publish(pub(9)) is True
    # the server's 409, a re-GET, the patch with the fresh resourceVersion
    assert env.calls() == [
        ("patch", "nodefeatures", 409),
        ("get", "nodefeatures", 200),
        ("patch", "nodefeatures", 200),
    ]
    obj = env.get()
    assert obj is not None and obj["spec"]["labels"][COUNT] == "9"
    assert obj["metadata"]["annotations"]["someone/else"] == "was-here"


def test_foreign_write_seen_by_the_watch_costs_no_conflict(env: Env) -> None:
    """With the watch, the sink learns the foreign write's resourceVersion from the server
    at once: the next change is one patch, and the foreign annotation is kept."""
    sink = env.sink()
    sink.publish(pub(8))
    time.sleep(1.0)  # the watch is up
    obj = env.get()
    assert obj is not None
    obj["metadata"].setdefault("annotations", {})["someone/else"] = "was-here"
    env.cluster.request("PUT", env.path, obj)
    time.sleep(1.0)  # the watch delivers it
    env.calls()
    assert sink.publish(pub(9)) is True
    assert env.calls() == [("patch", "nodefeatures", 200)]
    obj = env.get()
    assert obj is not None and obj["spec"]["labels"][COUNT] == "9"
    assert obj["metadata"]["annotations"]["someone/else"] == "was-here"


def test_resync_get_heals_deleted_object(env: Env) -> None:
    # without the watch (a Role without 'watch'), the resync GET finds the deletion
    clock = Clock()
    sink = env.sink(clock=clock, resync_interval=3600, watch=False)
    sink.publish(pub())
    env.cluster.request("DELETE", env.path)  # deleted behind the agent's back
    env.calls()
    clock.t += 1800
    assert sink.publish(pub()) is False  # not yet due: no request
    assert env.calls() == []
    clock.t += 2000  # past 3600 * 1.1
    assert sink.publish(pub()) is True
    assert env.calls() == [("get", "nodefeatures", 404), ("create", "nodefeatures", 201)]
    assert env.get() is not None


def test_forbidden_names_the_verb(env: Env, tmp_path: Path) -> None:
    """A ServiceAccount whose Role lacks ``create``: the server's 403 names the verb."""
    kubeconfig = _account(env.cluster, tmp_path, "no-create", ["get"])
    try:
        sink = env.sink(kubeconfig=kubeconfig)
        with pytest.raises(
            SinkError, match=r"RBAC verb 'create' on nodefeatures.nfd.k8s-sigs.io"
        ) as ei:
            sink.publish(pub())
        assert not ei.value.transient
        assert env.get() is None
    finally:
        _drop_account(env.cluster, "no-create")


def _account(c: Cluster, tmp_path: Path, name: str, verbs: list[str]) -> Path:
    """A kubeconfig of ServiceAccount ``name``, whose Role has ``verbs`` on nodefeatures."""
    c.apply({"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": name, "namespace": NS}})  # fmt: skip
    c.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": NS},
            "rules": [
                {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"], "verbs": verbs}
            ],
        }
    )
    c.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
        }
    )
    token = c.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    return c.write_kubeconfig(tmp_path / f"{name}.kubeconfig", {"token": token})


def _drop_account(c: Cluster, name: str) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    c.request("DELETE", f"{rbac}/namespaces/{NS}/rolebindings/{name}")
    c.request("DELETE", f"{rbac}/namespaces/{NS}/roles/{name}")


def test_owner_references_pod_and_daemonset(env: Env, agent_sa: dict[str, Any]) -> None:
    c = env.cluster
    ds = next(o for o in agent_sa["objects"] if o["kind"] == "DaemonSet")
    ds = c.apply(ds)
    spec = {
        "serviceAccountName": "nfd-gpu",
        "containers": [{"name": "nfd-gpu", "image": "ghcr.io/nfd-gpu/nfd-gpu:v0.1.0"}],
    }
    pod = c.request("POST", f"/api/v1/namespaces/{NS}/pods", daemonset_pod(ds, spec))
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    sink = env.sink(pod_name=name, pod_uid=uid)
    sink.publish(pub())
    obj = env.get()
    assert obj is not None
    refs = obj["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"], r["uid"]) for r in refs] == [
        ("Pod", name, uid),
        ("DaemonSet", "nfd-gpu", ds["metadata"]["uid"]),
    ]
    assert all(r["blockOwnerDeletion"] is False for r in refs)
    assert env.calls()[0] == ("get", "pods", 200)


def test_owner_references_disabled(env: Env) -> None:
    sink = env.sink(pod_name="p", pod_uid="u", owner_refs=())
    sink.publish(pub())
    obj = env.get()
    assert obj is not None and "ownerReferences" not in obj["metadata"]
    assert [r for _, r, _ in env.calls()] == ["nodefeatures", "nodefeatures"]


def test_schema_violation_is_rejected_by_server(env: Env) -> None:
    """NFD's CRD schema, enforced by the real server: attribute values are strings."""
    bad = Publication(labels={"a": "b"}, features={"attributes": {"gpu.y": {"elements": {"k": 1}}}})
    with pytest.raises(SinkError, match="422"):
        env.sink().publish(bad)
    assert env.calls() == [("get", "nodefeatures", 404), ("create", "nodefeatures", 422)]
    assert env.get() is None


def test_publishes_only_nfd_gpus_own_features(env: Env) -> None:
    """nfd-master appends the instances of every NodeFeature of a node: NFD's own
    pci.device / kernel.loadedmodule from nfd-gpu would be counted twice."""
    p = pub(2)
    p.features["instances"]["pci.device"] = {"elements": [{"attributes": {"vendor": "10de"}}]}
    p.features["flags"]["kernel.loadedmodule"] = {"elements": {"nvidia": {}}}
    env.sink().publish(p)
    obj = env.get()
    assert obj is not None
    names = {n for kind in obj["spec"]["features"].values() for n in kind}
    assert names == {"gpu.capability", "gpu.node", "gpu.device"}
    assert p.features["instances"]["pci.device"]  # the caller's features are untouched


def test_never_deletes_on_close(env: Env) -> None:
    sink = env.sink()
    sink.publish(pub())
    sink.close()
    assert env.get() is not None
    assert "delete" not in [v for v, _, _ in env.calls()]
