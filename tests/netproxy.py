"""A TCP proxy on loopback that can stop forwarding: a half-open connection made to order.

``freeze()`` stops relaying bytes on every connection open now, in both directions, while
keeping their sockets open (what a partition, a lost host or a conntrack drop leaves: the
client's kernel sees nothing wrong); connections made later are relayed as before.
``refuse(status)`` answers every new HTTP request whose line contains ``match`` with that
status instead of relaying it (a broken proxy). ``log`` records, with ``clock()``, every
connection closed at once while down (``closed``) and every request answered by the proxy
(``refused``): the attempts that never reach the server.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from typing import Any


class Proxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._frozen: set[int] = set()  # generations frozen
        self._generation = 0
        self._refusal: tuple[bytes, int] | None = None
        self.connections = 0
        self.down = False  # new connections are closed at once
        self.refused = 0  # requests answered by the proxy itself (refuse())
        self.clock: Any = time.monotonic  # the time ``log`` records
        self.log: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        """Every connection open now stops forwarding (its sockets stay open)."""
        with self._lock:
            self._frozen.add(self._generation)
            self._generation += 1

    def refuse(self, match: bytes, status: int) -> None:
        with self._lock:
            self._refusal = (match, status)

    def clear(self) -> None:
        """Relay everything again (new connections; frozen ones stay frozen)."""
        with self._lock:
            self._refusal = None
            self.down = False

    def cut(self, down: bool = True) -> None:
        """Close every connection open now and (``down``) refuse new ones until
        :meth:`clear` (the server restarting)."""
        with self._lock:
            self.down = down
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        for s in list(self._socks):
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                gen = self._generation
                self.connections += 1
            threading.Thread(target=self._serve, args=(client, gen), daemon=True).start()

    def _serve(self, client: socket.socket, gen: int) -> None:
        with self._lock:
            refusal, down = self._refusal, self.down
        if down:
            with self._lock:
                self.log.append((self.clock(), "closed"))
            client.close()
            return
        self._socks.append(client)
        with self._lock:
            refusal = self._refusal
        if refusal is not None:
            first = client.recv(65536)
            if refusal[0] in first.split(b"\r\n", 1)[0]:
                with self._lock:
                    self.refused += 1
                    self.log.append((self.clock(), "refused"))
                self._answer(client, refusal[1])
                return
            upstream = socket.create_connection(self.target)
            upstream.sendall(first)
        else:
            upstream = socket.create_connection(self.target)
        self._socks.append(upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b, gen), daemon=True).start()

    def _answer(self, client: socket.socket, status: int) -> None:
        body = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
             "reason": "Expired", "message": "injected by the proxy"}
        ).encode()  # fmt: skip
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
        with contextlib.suppress(OSError):
            client.sendall(head.encode() + body)
            client.close()

    def _pump(self, src: socket.socket, dst: socket.socket, gen: int) -> None:
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                break
            with self._lock:
                frozen = gen in self._frozen
            if frozen:
                self._stop.wait()  # hold both sockets open, relay nothing
                return
            if not data:
                break
            try:
                dst.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
