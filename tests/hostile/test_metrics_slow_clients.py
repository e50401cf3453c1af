"""The metrics server under slow clients, floods and idleness (issue 34, finding 2; issue 37).

Before: 8 connections sending one header byte every 4 s held the server's 8 slots for
ever (its timeout was per ``recv``, 5 s), so every ``/healthz`` probe failed and the
kubelet restarted the pod every ~90 s; and its thread woke 10 times a second while idle.
Now: a deadline per request, a new connection always gets a slot (the oldest is closed),
and the thread sleeps until a connection, a byte or a deadline.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from nfd_gpu.agent.metrics import Metrics, MetricsServer

PROBE_TIMEOUT = 1.0  # the kubelet's default timeoutSeconds


@pytest.fixture
def server() -> Iterator[tuple[MetricsServer, set[threading.Thread]]]:
    before = set(threading.enumerate())
    m = Metrics()
    m.published_all()
    srv = MetricsServer(m, "127.0.0.1", 0).start()
    time.sleep(0.2)
    try:
        yield srv, set(threading.enumerate()) - before
    finally:
        srv.stop()


def _probe(port: int, path: str = "/healthz") -> int | str:
    try:
        url = f"http://127.0.0.1:{port}{path}"
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def _drip(port: int, n: int, every: float, stop: threading.Event) -> list[socket.socket]:
    """``n`` connections, each sending one byte of a request head every ``every`` s."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]

    def run() -> None:
        head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
        i = 0
        while not stop.wait(every):
            for s in socks:
                with contextlib.suppress(OSError):
                    s.send(head[i % len(head) : i % len(head) + 1])
            i += 1

    threading.Thread(target=run, daemon=True).start()
    return socks


def test_slow_drip_clients_do_not_fail_the_probes(
    server: tuple[MetricsServer, set[threading.Thread]],
) -> None:
    srv, _ = server
    port = srv.address[1]
    stop = threading.Event()
    socks = _drip(port, 8, 4.0, stop)
    try:
        results = []
        t_end = time.monotonic() + 10.0
        while time.monotonic() < t_end:
            results.append(_probe(port))
            results.append(_probe(port, "/readyz"))
            time.sleep(0.5)
        assert results and all(r == 200 for r in results), results
    finally:
        stop.set()
        for s in socks:
            s.close()


def test_a_dripping_request_is_cut_at_its_deadline(
    server: tuple[MetricsServer, set[threading.Thread]],
) -> None:
    """One byte every 0.5 s: each read is quick, the request as a whole is not."""
    from nfd_gpu.agent.httpserve import REQUEST_DEADLINE

    srv, _ = server
    s = socket.create_connection(("127.0.0.1", srv.address[1]))
    s.settimeout(REQUEST_DEADLINE + 3)
    t0 = time.monotonic()
    closed = None
    with contextlib.suppress(OSError):
        for _ in range(40):
            s.send(b"X")
            time.sleep(0.5)
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed = time.monotonic() - t0
                    break
            except BlockingIOError:
                pass
            s.setblocking(True)
    if closed is None:  # a reset counts as closed
        closed = time.monotonic() - t0
    s.close()
    assert closed <= REQUEST_DEADLINE + 1.5, closed


def test_a_flood_of_idle_connections_does_not_starve_the_probes(
    server: tuple[MetricsServer, set[threading.Thread]],
) -> None:
    srv, _ = server
    port = srv.address[1]
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
    try:
        assert [_probe(port) for _ in range(5)] == [200] * 5
        assert _probe(port, "/metrics") == 200
    finally:
        for s in socks:
            s.close()


def test_a_scrape_that_never_reads_does_not_block_the_probes(
    server: tuple[MetricsServer, set[threading.Thread]],
) -> None:
    srv, _ = server
    port = srv.address[1]
    socks = []
    for _ in range(8):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    try:
        assert [_probe(port) for _ in range(5)] == [200] * 5
    finally:
        for s in socks:
            s.close()


def _switches(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_idle_server_does_not_wake(server: tuple[MetricsServer, set[threading.Thread]]) -> None:
    """Idle costs nothing: the serving thread sleeps until a client comes (before: it
    woke every 0.1 s, 20 times in these 2 s)."""
    _, threads = server
    assert len(threads) == 1
    (thread,) = threads
    before = _switches(thread)
    time.sleep(2.0)
    assert _switches(thread) - before <= 1
