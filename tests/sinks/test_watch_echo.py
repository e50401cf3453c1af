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
from nfd_gpu.sinks.watchlines import event_head
from tests.k8s_api_server import FakeKubeAPI
from tests.sinks.publications import pub
from tests.sinks.test_sink_nodefeature import NS, make_sink

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


def test_the_echo_of_an_own_write_is_not_decoded_and_a_foreign_edit_is(
    k8s_server: FakeKubeAPI, api_client: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[bytes] = []
    loads = json.loads

    def counting(s: Any, **kw: Any) -> Any:
        if isinstance(s, bytes) and s.startswith(b'{"type"'):  # a watch event, decoded whole
            decoded.append(s)
        return loads(s, **kw)

    monkeypatch.setattr(nodefeature_watch.json, "loads", counting)
    woke = threading.Event()
    events: list[str] = []
    sink = make_sink(api_client)
    sink.on_drift = woke.set
    on_event = sink.on_watch_event

    def seen(kind: str, obj: Any) -> None:  # what the watch handed on to the sink
        events.append(kind)
        on_event(kind, obj)

    sink.on_watch_event = seen  # type: ignore[method-assign]
    try:
        assert sink.publish(pub(8)) is True  # the create: the watch starts from its answer
        assert sink.publish(pub(4)) is True  # an update: its echo comes on the watch
        rv = k8s_server.get(NS, "nfd-gpu-node-a")["metadata"]["resourceVersion"]  # type: ignore[index]
        deadline = time.monotonic() + 5
        while sink._watch is None or sink._watch.resource_version != rv:
            assert time.monotonic() < deadline, "the echo did not come"
            time.sleep(0.01)
        assert events == [] and not [d for d in decoded if b'"MODIFIED"' in d]

        def evil(obj: dict[str, Any]) -> None:
            obj["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] = "99"

        k8s_server.edit(NS, "nfd-gpu-node-a", evil)
        assert woke.wait(5)
        assert events == ["MODIFIED"] and len(decoded) == 1
        assert sink.publish(pub(4)) is True
        assert "count=99 (want 4)" in (sink.take_repair() or "")
    finally:
        sink.close()
