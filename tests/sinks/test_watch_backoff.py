"""The own-object watch's requests under persistent faults and after a lost history
(issue 34's soak: at most 2 requests per node in any minute, the sink's re-reads counted).

Virtual time: the watch module's clock and its waits run on a test clock (a wait advances
it at once), so 30 minutes of back-off take a second; every request still goes over real
HTTP to the test API server, through the loopback proxy in front of it, and each one is
logged at its virtual time (the server's requests, and the attempts the proxy answers or
closes itself). The real sink runs the re-reads; a stand-in for the agent publishes at
once when the sink asks for a pass (``on_drift``).

Before: back-off from 0.5 s doubling, and every 410 made the sink re-read the object.
410 on every watch cost 12 requests in the worst minute (7 watches, 5 GETs), refused
connections 7 attempts; a blip across a compaction re-read the object that the restarted
watch lists anyway.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pytest

from nfd_gpu.sinks import SinkError, nodefeature_watch
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.k8s_api_server import FakeKubeAPI
from tests.netproxy import Proxy
from tests.sinks.publications import pub

NS, NODE = "nfd", "node-a"
OBJ = f"nfd-gpu-{NODE}"
STORM = 30 * 60.0  # virtual seconds of fault


class VirtualClock:
    """The watch module's ``time.monotonic``; its ``Event.wait(t)`` advances it by t."""

    def __init__(self) -> None:
        self.now = 10_000.0
        self.lock = threading.Lock()
        self.before_wait: Any = None  # the agent's pass, run when a wait begins

    def monotonic(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


@pytest.fixture
def vclock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    clock = VirtualClock()

    class Event(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            if timeout is None or timeout <= 0 or self.is_set():
                return super().wait(timeout)
            if clock.before_wait is not None:
                clock.before_wait()
            clock.advance(timeout)
            time.sleep(0.001)  # the proxy's and the server's threads run
            return self.is_set()

    fake_threading = SimpleNamespace(
        Event=Event,
        Thread=threading.Thread,
        RLock=threading.RLock,
        Timer=threading.Timer,
        current_thread=threading.current_thread,
    )
    monkeypatch.setattr(nodefeature_watch, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(nodefeature_watch, "threading", fake_threading)
    return clock


class Env:
    def __init__(self, api: FakeKubeAPI, clock: VirtualClock | None) -> None:
        self.api = api
        u = urlparse(api.url)
        self.proxy = Proxy((str(u.hostname), int(u.port or 80)))
        if clock is not None:
            api.clock = proxy_clock = clock.monotonic
            self.proxy.clock = proxy_clock
        self.drift = threading.Event()
        self.sink = self._sink()
        if clock is not None:
            clock.before_wait = self.agent_pass

    def _sink(self) -> NodeFeatureSink:
        import kubernetes

        cfg = kubernetes.client.Configuration()
        cfg.host = self.proxy.url
        cfg.retries = 0
        sink = NodeFeatureSink(
            node_name=NODE, namespace=NS, api_client=kubernetes.client.ApiClient(cfg),
            owner_refs=(), timeout=2.0, rng=random.Random(7),
        )  # fmt: skip
        sink.on_drift = self.drift.set
        return sink

    def agent_pass(self) -> None:
        """What the agent does when the sink asks for a pass: publish at once."""
        if self.drift.is_set():
            self.drift.clear()
            with contextlib.suppress(SinkError):
                self.sink.publish(pub())

    def requests_since(self, t0: float) -> list[tuple[float, str]]:
        """Every request at or after ``t0``: the server's and those the proxy ended."""
        return sorted(
            [(t, v) for t, v in self.api.log if t >= t0]
            + [(t, f"watch ({v} at the proxy)") for t, v in self.proxy.log if t >= t0]
        )

    def streaming(self, t0: float | None = None, watches: int = 1) -> bool:
        """A stream is open, after ``watches`` watch requests at or after ``t0``."""
        w = self.sink._watch
        sent = sum(1 for t, v in self.api.log if v == "watch" and (t0 is None or t >= t0))
        return w is not None and w._resp is not None and sent >= watches

    def start(self) -> None:
        self.api.bookmark_every = 0.2
        assert self.sink.publish(pub()) is True  # GET (404), create; the watch starts
        obj = self.api.get(NS, OBJ)
        assert obj is not None
        _until(self.streaming, 5)
        time.sleep(0.5)  # its bookmarks: the version to resume from is the stream's


def _until(cond: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def worst_minute(times: list[float]) -> int:
    """The most requests in any 60 s window."""
    return max((sum(1 for u in times if t <= u < t + 60) for t in times), default=0)


@pytest.fixture
def env(k8s_server: FakeKubeAPI, vclock: VirtualClock) -> Iterator[Env]:
    e = Env(k8s_server, vclock)
    try:
        yield e
    finally:
        vclock.before_wait = None
        e.sink.close()
        e.proxy.stop()


def _storm(env: Env, vclock: VirtualClock, down: bool) -> tuple[float, list[tuple[float, str]]]:
    """The stream open now cut (``down``: new connections closed at once, too); the
    requests of the STORM virtual seconds that follow."""
    vclock.advance(120.0)  # the stream worked for two minutes
    t0 = vclock.monotonic()
    env.proxy.cut(down=down)
    _until(lambda: vclock.monotonic() >= t0 + STORM, 30)
    return t0, env.requests_since(t0)


def test_410_on_every_watch_costs_at_most_2_requests_a_minute(
    env: Env, vclock: VirtualClock
) -> None:
    env.start()
    env.proxy.refuse(b"watch=true", 410)
    t0, requests = _storm(env, vclock, down=False)
    times = [t for t, _ in requests]
    first = [(round(t - t0, 1), v) for t, v in requests[:8]]
    print(f"\n410 on every watch, {STORM / 60:g} min: {len(requests)} requests, worst minute "
          f"{worst_minute(times)}; first ones {first}")  # fmt: skip
    assert worst_minute(times) <= 2, requests
    assert [v for _, v in requests if v == "get"] == []  # no re-read without a stream
    # the first retry came at once (the stream had worked), then about one a minute
    assert times[0] - t0 <= 1.0, requests
    assert len(requests) <= (times[-1] - t0) / 60 + 2, requests
    # the fault ends: the watch from "now" lists the object; still no re-read
    t1 = vclock.monotonic()
    env.proxy.clear()
    _until(lambda: env.streaming(t1), 10)
    assert [v for _, v in env.requests_since(t0) if v == "get"] == []
    assert env.sink._known


def test_refused_connections_cost_at_most_2_attempts_a_minute(
    env: Env, vclock: VirtualClock
) -> None:
    env.start()
    t0, requests = _storm(env, vclock, down=True)  # the apiserver down
    times = [t for t, _ in requests]
    print(f"\nconnections refused, {STORM / 60:g} min: {len(requests)} attempts, worst "
          f"minute {worst_minute(times)}")  # fmt: skip
    assert requests and all(v == "watch (closed at the proxy)" for _, v in requests), requests
    assert worst_minute(times) <= 2, requests
    assert times[0] - t0 <= 1.0, requests
    t1 = vclock.monotonic()
    env.proxy.clear()
    _until(lambda: env.streaming(t1), 10)
    assert [v for _, v in env.requests_since(t0) if v != "watch (closed at the proxy)"] == [
        "watch"  # resumed from its version: no 410, no re-read
    ]


def test_a_blip_across_a_compaction_reconnects_within_a_second_without_a_reread(
    env: Env, vclock: VirtualClock
) -> None:
    env.start()
    vclock.advance(3600.0)
    env.api.compact()  # the history the watch would resume from is gone
    t0 = vclock.monotonic()
    env.proxy.cut(down=False)  # a blip: the stream is cut, new connections work
    _until(lambda: env.streaming(t0, watches=2), 10)
    time.sleep(0.3)  # anything more it would send
    requests = env.requests_since(t0)
    print(f"\nblip across a compaction: {[(round(t - t0, 2), v) for t, v in requests]}")
    # the resume (410 in the stream), then the watch from "now" whose ADDED is the state
    assert [v for _, v in requests] == ["watch", "watch"], requests
    assert requests[-1][0] - t0 <= 1.0, requests
    assert env.sink._known and env.sink._drift is None


@pytest.mark.parametrize("bookmarks", [True, False], ids=["bookmark", "state-wait"])
def test_an_object_gone_while_the_history_was_lost_is_reread_once_and_restored(
    k8s_server: FakeKubeAPI, bookmarks: bool
) -> None:
    """Real time, the back-off's cap and the budget's window scaled from 60 s to 2 s. The
    restarted watch does not list the object (its first event is a bookmark, or nothing
    comes within ``state_wait``): the sink re-reads it, once, and the agent's pass creates
    it again."""
    env = Env(k8s_server, None)
    try:
        env.start()
        w = env.sink._watch
        assert w is not None
        w.state_wait = 0.5
        w.backoff_cap = 2.0
        if not bookmarks:
            k8s_server.bookmark_every = 60.0
        k8s_server.reset_counts()
        k8s_server.vanish(NS, OBJ)
        t0 = time.monotonic()
        assert env.drift.wait(5), "the sink was not told"
        took = time.monotonic() - t0
        assert env.sink.publish(pub()) is True
        counts = dict(k8s_server.counts)
    finally:
        env.sink.close()
        env.proxy.stop()
    print(f"\nobject gone across a compaction ({'bookmark' if bookmarks else 'state wait'}): "
          f"told in {took:.2f} s, {counts}")  # fmt: skip
    assert counts == {"watch": 2, "get": 1, "create": 1}, counts
    assert k8s_server.get(NS, OBJ) is not None
    assert took < 4.0  # a retry, the restart within the budget, then the bookmark / 0.5 s
