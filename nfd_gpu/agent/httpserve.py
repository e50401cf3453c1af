"""A small, bounded HTTP/1.1 GET server on one thread that sleeps while idle.

It serves ``/metrics``, ``/healthz`` and ``/readyz`` for ``metrics.py``.

- One thread runs an event loop over non-blocking sockets: ``selectors``, epoll on Linux.
- It wakes only for a connection, its bytes, a deadline or ``stop()``, never on a timer.
- So an idle agent costs no CPU here.

Every resource a client can take is bounded:

- ``MAX_CONNECTIONS`` connections held at once. A new connection is never refused.
  When every slot is held, the oldest connection is closed and ``on_reject`` counts it.
  So slow or idle clients cannot starve the kubelet's probes. A probe's request arrives
  with the connection and is answered in the same turn of the loop.
- ``REQUEST_DEADLINE`` seconds from accept to the last byte of the answer. It is a
  deadline per request, not per read, however the client drips its bytes.
- ``MAX_HEAD`` bytes of request line and headers. No body is read.
- One request per connection: ``Connection: close``.
- Out of descriptors, ``EMFILE``: accepting pauses for ``ACCEPT_PAUSE`` seconds instead
  of spinning on the listening socket.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 32  # connections held at once (descriptors, buffers)
REQUEST_DEADLINE = 5.0  # seconds from accept to the answer sent, for the whole request
MAX_HEAD = 8192  # bytes of request line and headers
LISTEN_BACKLOG = 64
ACCEPT_PAUSE = 0.1  # seconds accepting pauses when the process is out of descriptors

# path -> (status, content type, body)
Route = Callable[[str], tuple[int, str, bytes]]

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}  # fmt: skip


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    deadline: float
    accepted: float
    head: bytearray = field(default_factory=bytearray)
    out: bytes = b""  # the answer still to send; empty while the request is read


def _answer(code: int, ctype: str, body: bytes, head_only: bool = False) -> bytes:
    lines = (
        f"HTTP/1.1 {code} {REASONS.get(code, 'Status')}\r\n"
        f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return lines.encode("ascii") + (b"" if head_only else body)


class Server:
    """The server: ``route(path)`` answers each GET.

    ``on_reject()`` counts connections closed unserved: evicted for a newer one, past the
    deadline, or a head too large.
    """

    def __init__(
        self,
        address: tuple[str, int],
        route: Route,
        on_reject: Callable[[], None] = lambda: None,
    ) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.listener.bind(address)
            self.listener.listen(LISTEN_BACKLOG)
        except OSError:
            self.listener.close()
            raise
        self.listener.setblocking(False)
        self.route = route
        self.on_reject = on_reject
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self.listener, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: dict[int, _Conn] = {}
        self._accept_paused_until: float | None = None
        self._stopping = False
        self.thread = threading.Thread(target=self._loop, name="metrics-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> Server:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5.0)
        for conn in list(self._conns.values()):
            self._close(conn)
        for s in (self.listener, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()

    # -- the loop ---------------------------------------------------------------------
    def _timeout(self, now: float) -> float | None:
        """Seconds to the next deadline; None when nothing is due, to sleep until woken."""
        due = [c.deadline for c in self._conns.values()]
        if self._accept_paused_until is not None:
            due.append(self._accept_paused_until)
        return max(0.0, min(due) - now) if due else None

    def _loop(self) -> None:
        while not self._stopping:
            try:
                events = self._sel.select(self._timeout(time.monotonic()))
            except InterruptedError:
                continue
            for key, mask in events:
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(64)
                else:
                    conn = self._conns.get(key.fd)
                    if conn is not None:
                        self._io(conn, mask)
            self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self.on_reject()
            self._close(conn)
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._sel.register(self.listener, selectors.EVENT_READ, "listen")

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: pause instead of spinning on a readable listener
                    self._sel.unregister(self.listener)
                    self._accept_paused_until = time.monotonic() + ACCEPT_PAUSE
                    return
                if e.errno in (errno.ECONNABORTED, errno.EINTR):
                    continue
                raise
            if len(self._conns) >= MAX_CONNECTIONS:
                oldest = min(self._conns.values(), key=lambda c: c.accepted)
                self.on_reject()
                self._close(oldest)
            sock.setblocking(False)
            now = time.monotonic()
            conn = _Conn(sock, now + REQUEST_DEADLINE, now)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, "conn")
            self._read(conn)  # a probe's request is usually here already

    def _io(self, conn: _Conn, mask: int) -> None:
        if conn.out:
            if mask & selectors.EVENT_WRITE:
                self._write(conn)
        elif mask & selectors.EVENT_READ:
            self._read(conn)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(MAX_HEAD + 1 - len(conn.head))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.head += data
        end = conn.head.find(b"\r\n\r\n")
        if end < 0:
            end = conn.head.find(b"\n\n")
        if end < 0:
            if len(conn.head) > MAX_HEAD:
                self.on_reject()
                self._respond(conn, _answer(431, "text/plain", b"request head too large\n"))
            return
        self._respond(conn, self._handle(bytes(conn.head[:end])))

    def _handle(self, head: bytes) -> bytes:
        parts = head.split(b"\n", 1)[0].strip().split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return _answer(400, "text/plain", b"bad request\n")
        method, target = parts[0], parts[1].decode("latin-1")
        if method not in (b"GET", b"HEAD"):
            return _answer(405, "text/plain", b"only GET\n")
        try:
            code, ctype, body = self.route(target.split("?", 1)[0])
        except Exception:
            log.error("metrics: answering %s failed", target[:200], exc_info=True)
            code, ctype, body = 500, "text/plain", b"internal error\n"
        return _answer(code, ctype, body, head_only=method == b"HEAD")

    def _respond(self, conn: _Conn, answer: bytes) -> None:
        conn.out = answer
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, "conn")
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if fd >= 0 and self._conns.get(fd) is conn:
            del self._conns[fd]
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(conn.sock)
        conn.sock.close()
