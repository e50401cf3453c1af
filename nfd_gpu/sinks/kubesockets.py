"""The Kubernetes client's sockets: TCP keepalive on each, and a record of each.

:func:`keepalive` asks the kernel for client-go's keepalive on every connection an
``ApiClient``'s pools open; :func:`track_sockets` remembers each socket they open, so
``ObjectClient.abort()`` (a deadline, SIGTERM) can shut a request's connections down.
Both use urllib3's public pool hooks; urllib3 comes with the kubernetes client and is
imported on first use.
"""

from __future__ import annotations

import socket
import weakref
from typing import Any

# TCP keepalive as client-go's dialer asks the kernel for it (30 s idle; Go's own probe
# interval and count, 15 s and 9): a peer gone without a FIN or RST (a lost host, a
# partition) ends the connection after about 3 minutes of silence
KEEPALIVE = ((socket.SO_KEEPALIVE, 1), ("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 15),
             ("TCP_KEEPCNT", 9))  # fmt: skip


def keepalive(api_client: Any) -> None:
    """TCP keepalive on every connection ``api_client``'s pools open.
    It uses urllib3's ``socket_options``, with its default ``TCP_NODELAY`` kept."""
    import urllib3  # lazy: comes with kubernetes

    pm = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pm is None:
        return
    opts = list(urllib3.connection.HTTPConnection.default_socket_options)
    for name, value in KEEPALIVE:
        if isinstance(name, int):
            opts.append((socket.SOL_SOCKET, name, value))
        elif hasattr(socket, name):  # Linux; macOS lacks some
            opts.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    pm.connection_pool_kw["socket_options"] = opts


def track_sockets(api_client: Any, sockets: weakref.WeakSet[socket.socket]) -> None:
    """Remember every socket the client's connection pools open, by urllib3's public
    ``pool_classes_by_scheme`` hook. So a deadline or SIGTERM can shut them down."""
    import urllib3  # lazy: comes with kubernetes

    pm = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if pm is None or getattr(pm, "_nfd_gpu_tracked", False):
        return

    def tracked(conn_cls: Any) -> Any:
        class Conn(conn_cls):  # type: ignore[misc]
            def connect(self) -> None:
                super().connect()
                if self.sock is not None:
                    sockets.add(self.sock)

        return Conn

    def pool(pool_cls: Any) -> Any:
        return type(
            pool_cls.__name__, (pool_cls,), {"ConnectionCls": tracked(pool_cls.ConnectionCls)}
        )

    pm.pool_classes_by_scheme = {
        "http": pool(urllib3.HTTPConnectionPool),
        "https": pool(urllib3.HTTPSConnectionPool),
    }
    pm._nfd_gpu_tracked = True
