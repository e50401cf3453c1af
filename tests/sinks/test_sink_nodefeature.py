"""NodeFeature sink with the real kubernetes client against tests/k8s_api_server.py.

Only what a real API server cannot be made to do on demand lives here: injected 5xx
answers, slow answers (client timeouts), endless conflicts. Everything else the sink does
is checked against the real kube-apiserver in tests/e2e/test_sink_real_server.py."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.k8s_api_server import FakeKubeAPI
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
    k8s_server.fail("patch", 409, count=10)
    with pytest.raises(SinkError, match="gave up after 3") as ei:
        sink.publish(pub(9))
    assert ei.value.transient
    assert k8s_server.counts["patch"] == 3


def test_server_error_is_transient_and_keeps_object(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.fail("patch", 500)
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


def test_watch_forbidden_falls_back_to_the_resync_get(
    k8s_server: FakeKubeAPI, api_client: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A Role without 'watch' (an older install): one warning, and drift is still found by
    the resync GET, as before the watch existed."""
    import time

    clock = Clock()
    k8s_server.deny("watch")
    sink = make_sink(api_client, clock, resync_interval=3600)
    try:
        sink.publish(pub(8))
        deadline = time.monotonic() + 5
        while k8s_server.counts["watch"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert k8s_server.counts["watch"] == 1  # refused once; retried after a period
        assert sum("watch forbidden" in m for m in caplog.messages) == 1
        k8s_server.remove(NS, "nfd-gpu-node-a")
        assert sink.publish(pub(8)) is False  # no watch: not seen before the resync
        clock.t += 3600 * 1.1 + 1
        assert sink.publish(pub(8)) is True  # the resync GET finds it gone: created
        assert sink.take_repair() == "deleted"
        assert k8s_server.get(NS, "nfd-gpu-node-a") is not None
    finally:
        sink.close()


def test_watch_sees_a_foreign_edit_and_says_what_differed(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    import threading

    woke = threading.Event()
    sink = make_sink(api_client)
    sink.on_drift = woke.set
    try:
        sink.publish(pub(8))

        def evil(obj: dict[str, Any]) -> None:
            obj["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] = "99"
            obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] = "node-b"

        k8s_server.edit(NS, "nfd-gpu-node-a", evil)
        assert woke.wait(5)
        assert sink.publish(pub(8)) is True
        what = sink.take_repair()
        assert what is not None
        assert "node-name='node-b' (want 'node-a')" in what
        assert "gpu.feature.node.kubernetes.io/count=99 (want 8)" in what
        assert sink.take_repair() is None  # said once
        obj = k8s_server.get(NS, "nfd-gpu-node-a")
        assert (
            obj is not None
            and obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == "node-a"
        )
    finally:
        sink.close()


def test_a_reload_that_rebuilds_the_sinks_stops_the_old_watch(
    k8s_server: FakeKubeAPI, tmp_path: Any
) -> None:
    import time

    from nfd_gpu.agent import Agent
    from nfd_gpu.config import loader as config
    from tests.hostile.test_api_faults import FakeResult

    flags = {
        "outputs": "nodefeature",
        "node_name": "node-a",
        "namespace": NS,
        "kubeconfig": k8s_server.kubeconfig(str(tmp_path / "kubeconfig")),
        "udev": False,
    }
    agent = Agent(
        config.load(env={}, flags=flags),
        scan=lambda *_, **__: FakeResult({"a.example.com/x": "1"}),
        reload=lambda: config.load(env={}, flags={**flags, "api_timeout": 5}),
    )
    try:
        assert agent.run_pass()
        old = agent.sinks[0]
        assert isinstance(old, NodeFeatureSink) and old._watch is not None
        agent._reload()
        assert agent.sinks[0] is not old
        time.sleep(0.1)
        assert not old._watch.running
        assert agent.sinks[0].on_drift == agent.drift_event  # type: ignore[attr-defined]
    finally:
        for sink in agent.sinks:
            sink.close()


def _evil(obj: dict[str, Any]) -> None:
    obj["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] = "99"


def _edit_and_report(k8s_server: FakeKubeAPI, sink: NodeFeatureSink) -> None:
    """A foreign edit whose watch event reaches the sink now (as the watch thread would)."""
    k8s_server.edit(NS, "nfd-gpu-node-a", _evil)
    sink.on_watch_event("MODIFIED", k8s_server.get(NS, "nfd-gpu-node-a"))


def test_drift_reported_while_a_write_is_in_flight_is_repaired_next_pass(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """An edit that lands after the agent's write, reported before the write returns,
    is neither erased by the write's answer nor lost from the repair count."""
    sink = make_sink(api_client, watch=False)
    sink.publish(pub(8))
    patch = sink.api.patch

    def patch_then_edit(body: dict[str, Any]) -> Any:
        answer = patch(body)
        _edit_and_report(k8s_server, sink)
        return answer

    sink.api.patch = patch_then_edit  # type: ignore[method-assign]
    assert sink.publish(pub(9)) is True
    sink.api.patch = patch  # type: ignore[method-assign]
    assert sink.publish(pub(9)) is True  # the edit is restored
    what = sink.take_repair()
    assert what is not None and "count=99 " in what
    obj = k8s_server.get(NS, "nfd-gpu-node-a")
    assert obj is not None and obj["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] == "9"


def test_drift_reported_while_publish_finds_nothing_to_write_is_counted(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """An edit reported between publish's comparison and its confirm stays drift: the
    pass it woke repairs it and says so."""
    sink = make_sink(api_client, watch=False)
    sink.publish(pub(8))
    matches = sink._matches

    def matches_then_edit(current: dict[str, Any], want: dict[str, Any]) -> bool:
        sink._matches = matches  # type: ignore[method-assign]
        same = matches(current, want)
        _edit_and_report(k8s_server, sink)
        return same

    sink._matches = matches_then_edit  # type: ignore[method-assign]
    assert sink.publish(pub(8)) is False
    assert sink.publish(pub(8)) is True
    what = sink.take_repair()
    assert what is not None and "count=99 (want 8)" in what


def test_a_replacement_copies_neither_the_old_spec_nor_managed_fields() -> None:
    """The update body is the server's object with the new spec: its old spec (every rule
    label of the last write) and managedFields are dropped, not deep-copied first (a third
    of a changed pass's CPU with 1,000 rules' labels)."""
    from nfd_gpu.sinks.nodefeature import STATE_ANNOTATION
    from nfd_gpu.sinks.nodefeature_patch import replacement

    class NoCopy:
        def __deepcopy__(self, memo: object) -> object:
            raise AssertionError("copied")

    current = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": "n", "resourceVersion": "5", "managedFields": [NoCopy()],
                     "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {"labels": {"k": NoCopy()}},
    }  # fmt: skip
    want = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"labels": {"l": "1"}, "ownerReferences": []},
        "spec": {"labels": {"new": "v"}},
    }
    body = replacement(current, want, STATE_ANNOTATION)
    assert body["spec"] is want["spec"]
    assert body["metadata"] == {"name": "n", "resourceVersion": "5", "annotations": {"x": "y"},
                                "labels": {"a": "b", "l": "1"}, "ownerReferences": []}  # fmt: skip
    assert body["metadata"]["annotations"] is not current["metadata"]["annotations"]


def test_an_unchanged_publication_is_not_checked_again(
    k8s_server: FakeKubeAPI, api_client: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size and admission-policy check serialises the whole object: done once per
    object, not on every unchanged pass (1,000 rules' labels made it most of one)."""
    from nfd_gpu.sinks import nodefeature_size as nodefeature

    dumps: list[int] = []
    real = nodefeature.json.dumps

    def counted(obj: object, **kw: Any) -> str:
        dumps.append(1)
        return real(obj, **kw)

    monkeypatch.setattr(nodefeature.json, "dumps", counted)
    sink = make_sink(api_client)
    assert sink.publish(pub(8)) is True
    checks = len(dumps)
    for _ in range(3):
        assert sink.publish(pub(8)) is False
    assert len(dumps) == checks  # (json.dumps is the client's too: nothing was sent)
    assert sink.publish(pub(9)) is True and len(dumps) > checks
