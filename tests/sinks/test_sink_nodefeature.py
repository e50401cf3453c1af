"""NodeFeature sink with the real kubernetes client against tests/k8s_api_server.py."""

from __future__ import annotations

import random
from typing import Any

import pytest
from k8s_api_server import FakeKubeAPI

from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL, NodeFeatureSink

NS = "nfd-gpu"


def pub(count: int = 8) -> Publication:
    features: dict[str, dict[str, Any]] = {
        "flags": {"gpu.capability": {"elements": {"mig": {}}}},
        "attributes": {"gpu.node": {"elements": {"count": str(count)}}},
        "instances": {
            "gpu.device": {
                "elements": [
                    {"attributes": {"index": str(i), "vendor": "10de"}} for i in range(count)
                ]
            }
        },
    }
    return Publication(
        labels={
            "gpu.feature.node.kubernetes.io/present": "true",
            "gpu.feature.node.kubernetes.io/count": str(count),
        },
        features=features,
    )


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_sink(api_client: object, clock: Clock | None = None, **kw: Any) -> NodeFeatureSink:
    return NodeFeatureSink(
        node_name="node-a",
        namespace=NS,
        api_client=api_client,
        clock=clock or Clock(),
        sleep=lambda s: None,
        rng=random.Random(1),
        **kw,
    )


def test_create_then_no_requests_when_unchanged(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink = make_sink(api_client)
    assert sink.publish(pub()) is True
    assert k8s_server.counts == {"get": 1, "create": 1}
    obj = k8s_server.get(NS, "nfd-gpu-node-a")
    assert obj is not None
    assert obj["metadata"]["labels"][NODE_NAME_LABEL] == "node-a"
    assert obj["spec"]["labels"] == pub().labels
    assert obj["spec"]["features"] == pub().features
    for _ in range(5):
        assert sink.publish(pub()) is False
    assert k8s_server.counts == {"get": 1, "create": 1}
    assert k8s_server.rejected == []


def test_change_is_one_replace(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.reset_counts()
    assert sink.publish(pub(9)) is True
    assert k8s_server.counts == {"update": 1}
    obj = k8s_server.get(NS, "nfd-gpu-node-a")
    assert obj is not None and obj["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] == "9"
    assert len(obj["spec"]["features"]["instances"]["gpu.device"]["elements"]) == 9


def test_conflict_is_retried_with_fresh_resource_version(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.bump(NS, "nfd-gpu-node-a")  # someone else wrote
    k8s_server.reset_counts()
    assert sink.publish(pub(9)) is True
    assert k8s_server.counts == {"update": 2, "get": 1}  # 409, re-GET, PUT
    assert (
        k8s_server.get(NS, "nfd-gpu-node-a")["spec"]["labels"][  # type: ignore[index]
            "gpu.feature.node.kubernetes.io/count"
        ]
        == "9"
    )


def test_conflicts_are_bounded(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client, max_conflict_retries=2)
    sink.publish(pub(8))
    k8s_server.fail("update", 409, count=10)
    with pytest.raises(SinkError, match="gave up after 3") as ei:
        sink.publish(pub(9))
    assert ei.value.transient
    assert k8s_server.counts["update"] == 3


def test_resync_get_heals_deleted_object(k8s_server: FakeKubeAPI, api_client: object) -> None:
    clock = Clock()
    sink = make_sink(api_client, clock=clock, resync_interval=3600)
    sink.publish(pub())
    k8s_server.objects.clear()  # deleted behind the agent's back
    clock.t += 1800
    assert sink.publish(pub()) is False  # not yet due: no request
    clock.t += 2000  # past 3600 * 1.1
    k8s_server.reset_counts()
    assert sink.publish(pub()) is True
    assert k8s_server.counts == {"get": 1, "create": 1}


def test_forbidden_names_the_verb(k8s_server: FakeKubeAPI, api_client: object) -> None:
    k8s_server.deny("create")
    sink = make_sink(api_client)
    with pytest.raises(
        SinkError, match=r"RBAC verb 'create' on nodefeatures.nfd.k8s-sigs.io"
    ) as ei:
        sink.publish(pub())
    assert not ei.value.transient
    assert k8s_server.get(NS, "nfd-gpu-node-a") is None


def test_server_error_is_transient_and_keeps_object(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.fail("update", 500)
    with pytest.raises(SinkError) as ei:
        sink.publish(pub(9))
    assert ei.value.transient
    assert (
        k8s_server.get(NS, "nfd-gpu-node-a")["spec"]["labels"][  # type: ignore[index]
            "gpu.feature.node.kubernetes.io/count"
        ]
        == "8"
    )
    assert sink.publish(pub(9)) is True  # next attempt succeeds


def test_timeout_is_transient(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client, timeout=0.3)
    k8s_server.delay("get", 1.0)
    with pytest.raises(SinkError, match="failed") as ei:
        sink.publish(pub())
    assert ei.value.transient
    assert sink.publish(pub()) is True


def test_owner_references_pod_and_daemonset(k8s_server: FakeKubeAPI, api_client: object) -> None:
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "ds-uid"}
    k8s_server.add_pod(NS, "nfd-gpu-abcde", "pod-uid", [ds])
    sink = make_sink(api_client, pod_name="nfd-gpu-abcde", pod_uid="pod-uid")
    sink.publish(pub())
    refs = k8s_server.get(NS, "nfd-gpu-node-a")["metadata"]["ownerReferences"]  # type: ignore[index]
    assert [(r["kind"], r["name"], r["uid"]) for r in refs] == [
        ("Pod", "nfd-gpu-abcde", "pod-uid"),
        ("DaemonSet", "nfd-gpu", "ds-uid"),
    ]
    assert all(r["blockOwnerDeletion"] is False for r in refs)


def test_owner_references_disabled(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client, pod_name="p", pod_uid="u", owner_refs=())
    sink.publish(pub())
    assert k8s_server.get(NS, "nfd-gpu-node-a")["metadata"]["ownerReferences"] == []  # type: ignore[index]
    assert k8s_server.counts["get-pod"] == 0


def test_schema_violation_is_rejected_by_server(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    bad = Publication(labels={"a": "b"}, features={"attributes": {"gpu.y": {"elements": {"k": 1}}}})
    sink = make_sink(api_client)
    with pytest.raises(SinkError, match="422"):
        sink.publish(bad)
    assert k8s_server.rejected


def test_publishes_only_nfd_gpus_own_features(k8s_server: FakeKubeAPI, api_client: object) -> None:
    """nfd-master appends the instances of every NodeFeature of a node: NFD's own
    pci.device / kernel.loadedmodule from nfd-gpu would be counted twice (issue 10)."""
    p = pub(2)
    p.features["instances"]["pci.device"] = {"elements": [{"attributes": {"vendor": "10de"}}]}
    p.features["flags"]["kernel.loadedmodule"] = {"elements": {"nvidia": {}}}
    make_sink(api_client).publish(p)
    spec = k8s_server.get(NS, "nfd-gpu-node-a")["spec"]  # type: ignore[index]
    names = {n for kind in spec["features"].values() for n in kind}
    assert names == {"gpu.capability", "gpu.node", "gpu.device"}
    assert p.features["instances"]["pci.device"]  # the caller's features are untouched


def test_never_deletes_on_close(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client)
    sink.publish(pub())
    sink.close()
    assert k8s_server.get(NS, "nfd-gpu-node-a") is not None
    assert k8s_server.counts["delete"] == 0
