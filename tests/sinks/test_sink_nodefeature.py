"""NodeFeature sink with the real kubernetes client against tests/k8s_api_server.py.

Only what a real API server cannot be made to do on demand lives here: injected 5xx
answers, slow answers (client timeouts), endless conflicts. Everything else the sink does
is checked against the real kube-apiserver in tests/e2e/test_sink_real_server.py."""

from __future__ import annotations

import random
from typing import Any

import pytest
from k8s_api_server import FakeKubeAPI

from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.sinks.publications import Clock, pub

NS = "nfd-gpu"


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


def test_conflicts_are_bounded(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink = make_sink(api_client, max_conflict_retries=2)
    sink.publish(pub(8))
    k8s_server.fail("update", 409, count=10)
    with pytest.raises(SinkError, match="gave up after 3") as ei:
        sink.publish(pub(9))
    assert ei.value.transient
    assert k8s_server.counts["update"] == 3


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


def test_without_the_kubernetes_client_one_line_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``kubernetes`` is the optional extra ``[kubernetes]``: without it the nodefeature
    output fails with one line naming it (``run`` prints it as ``nfd-gpu: error: ...``)."""
    import sys

    from nfd_gpu.sinks.nodefeature import build_api_client

    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes -> ImportError
    with pytest.raises(SinkError) as e:
        build_api_client()
    assert str(e.value) == (
        "the nodefeature output needs the kubernetes client: pip install 'nfd-gpu[kubernetes]'"
    )
