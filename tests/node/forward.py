"""The real node's only way out of its network namespace: a TCP relay to the API server.

Run as ``python -m tests.node.forward NETNS PORT LISTEN_IP...``: listens on each
``LISTEN_IP:PORT`` inside the network namespace ``NETNS`` (a ``/proc/<pid>/ns/net``
path) and relays every connection to ``127.0.0.1:PORT`` of the namespace it was started
in (the host's loopback, where kube-apiserver listens). A socket stays in the namespace
it was made in, so the listeners are made after ``setns`` into ``NETNS`` and the
outgoing connections after ``setns`` back. TLS passes through untouched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, port: int) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            up = socket.create_connection(("127.0.0.1", port))
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def main(netns: str, port: int, listen: list[str]) -> None:
    host = os.open("/proc/self/ns/net", os.O_RDONLY)
    node = os.open(netns, os.O_RDONLY)
    _setns(node)
    listeners = []
    for ip in listen:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ip, port))
        s.listen(64)
        listeners.append(s)
    _setns(host)
    print("forward: listening", flush=True)
    threads = [threading.Thread(target=_serve, args=(s, port), daemon=True) for s in listeners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
