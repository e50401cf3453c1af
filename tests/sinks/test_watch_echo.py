"""The watch's echo of the sink's own write: its metadata decoded, its object not.

Against tests/k8s_api_server.py (which writes events as Python's ``json.dumps`` does, with
spaces) and on the lines kube-apiserver writes (compact, the object's keys sorted)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from nfd_gpu.sinks import nodefeature_watch
from nfd_gpu.sinks.nodefeature_watch import OwnObjectWatch
from nfd_gpu.sinks.watchlines import event_head
from tests.k8s_api_server import FakeKubeAPI
from tests.sinks.publications import pub
from tests.sinks.test_sink_nodefeature import NS, _evil, make_sink

OBJ = {
    "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
    "kind": "NodeFeature",
    "metadata": {"name": "nfd-gpu-node-a", "resourceVersion": "12", "labels": {"a": "b"}},
    "spec": {"labels": {"k": "v" * 100}},
}


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED"])
def test_the_head_is_the_type_and_the_metadata(kind: str, separators: tuple[str, str]) -> None:
    line = json.dumps({"type": kind, "object": OBJ}, separators=separators).encode()
    assert event_head(line) == (kind, OBJ["metadata"])
    assert event_head(b'{\t"type" : "%s" ,\r\n"object":{ "metadata" :{}}}' % kind.encode()) == (
        kind,
        {},
    )


@pytest.mark.parametrize(
    "event",
    [
        {"type": "DELETED", "object": OBJ},  # the sink reads a deletion whole
        {"type": "BOOKMARK", "object": OBJ},
        {"type": "ERROR", "object": {"code": 410}},
        {"object": OBJ, "type": "MODIFIED"},  # not as kube-apiserver writes it
        {"type": "MODIFIED", "object": {"spec": {}, **OBJ}},  # spec before the metadata
        {"type": "MODIFIED", "object": {**OBJ, "metadata": ["not", "an", "object"]}},
    ],
)
def test_any_other_line_is_decoded_whole(event: dict[str, Any]) -> None:
    assert event_head(json.dumps(event).encode()) is None


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"MODIFIED","object":{"kind":"NodeFeature""metadata":{}}}',
        b'{"type":"MODIFIED","object":{"kind"="x","metadata":{}}}',
        b'{"type":"MODIFIED","object":{"metadata":{"name":',
        b'{"type":"MODIFIED","object":{"metadata":{"name":"\xff"}}}',
        b"",
    ],
)
def test_a_broken_line_is_left_to_the_whole_decode(line: bytes) -> None:
    assert event_head(line) is None


def _watch(own: set[str], seen: list[tuple[str, Any]]) -> OwnObjectWatch:
    """A watch on nfd-gpu-node-a, never started: its events are handed to it line by line."""
    return OwnObjectWatch(
        api_client=None, group="g", version="v", namespace=NS, plural="p",
        name="nfd-gpu-node-a", on_event=lambda kind, obj: seen.append((kind, obj)),
        is_echo=own.__contains__, duration=60.0, timeout=5.0,
    )  # fmt: skip


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_an_echo_is_not_decoded_nor_handed_on_and_any_other_event_is(
    separators: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[bytes] = []
    loads = json.loads
    monkeypatch.setattr(
        nodefeature_watch.json, "loads", lambda s, **kw: (decoded.append(s), loads(s, **kw))[1]
    )
    seen: list[tuple[str, Any]] = []
    watch = _watch({"12"}, seen)

    def line(kind: str, rv: str, name: str = "nfd-gpu-node-a") -> bytes:
        meta = {**OBJ["metadata"], "resourceVersion": rv, "name": name}  # type: ignore[dict-item]
        event = {"type": kind, "object": {**OBJ, "metadata": meta}}
        return json.dumps(event, separators=separators).encode()

    assert watch._event(line("MODIFIED", "12"), 1) is False  # the own write's echo
    assert seen == [] and decoded == [] and watch.resource_version == "12"
    others = [("MODIFIED", "13", "nfd-gpu-node-a"), ("DELETED", "12", "nfd-gpu-node-a"),
              ("MODIFIED", "12", "nfd-gpu-node-b")]  # fmt: skip
    for kind, rv, name in others:  # a foreign edit, a deletion, another object
        watch._event(line(kind, rv, name), 1)
    assert [k for k, _ in seen] == ["MODIFIED", "DELETED"] and len(decoded) == 3
    assert watch.resource_version == "12"  # the other object's event names the last version


def test_a_foreign_edit_after_the_agent_s_writes_is_seen_and_repaired(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    woke = threading.Event()
    sink = make_sink(api_client)
    sink.on_drift = woke.set
    try:
        assert sink.publish(pub(8)) is True  # the create: the watch starts from its answer
        assert sink.publish(pub(4)) is True  # an update: its echo comes on the watch
        rv = k8s_server.get(NS, "nfd-gpu-node-a")["metadata"]["resourceVersion"]  # type: ignore[index]
        deadline = time.monotonic() + 5
        while sink._watch is None or sink._watch.resource_version != rv:
            assert time.monotonic() < deadline, "the echo did not come"
            time.sleep(0.01)
        assert not woke.is_set()  # the echo is no drift, decoded or not
        k8s_server.edit(NS, "nfd-gpu-node-a", _evil)
        assert woke.wait(5)
        assert sink.publish(pub(4)) is True
        assert "count=99 (want 4)" in (sink.take_repair() or "")
    finally:
        sink.close()


def test_an_echo_before_its_write_s_answer_waits_for_that_write(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """The echo of a write whose answer is not in yet is known once the write ends, so it is
    not decoded; another version waits for that write too, then is decoded as any event."""
    sink = make_sink(api_client, watch=False)
    sink.publish(pub(8))
    answered, release = threading.Event(), threading.Event()
    patch = sink.api.patch

    def held(body: dict[str, Any]) -> Any:
        answer = patch(body)
        answered.set()
        assert release.wait(5)
        return answer

    sink.api.patch = held  # type: ignore[method-assign]
    write = threading.Thread(target=sink.publish, args=(pub(9),))
    write.start()
    assert answered.wait(5)
    rv = k8s_server.get(NS, "nfd-gpu-node-a")["metadata"]["resourceVersion"]  # type: ignore[index]
    got: dict[str, bool] = {}
    asks = [threading.Thread(target=lambda v=v: got.update({v: sink._own_write(v)}))
            for v in (rv, "999")]  # fmt: skip
    for t in asks:
        t.start()
    time.sleep(0.3)
    assert got == {}  # both wait while the write is out
    release.set()
    for t in (*asks, write):
        t.join(5)
    assert got == {rv: True, "999": False}
    t0 = time.monotonic()
    assert sink._own_write("1000") is False  # no write out: no wait
    assert time.monotonic() - t0 < 0.1
