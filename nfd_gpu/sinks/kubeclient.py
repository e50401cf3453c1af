"""Two low-level helpers of the NodeFeature sink on a ``kubernetes`` ``ApiClient``: a raw GET
(the own Pod, without the generated API's validators) and socket tracking (so a deadline
or SIGTERM can shut a request's connections down)."""

from __future__ import annotations

import socket
import weakref
from typing import Any


def get_raw(api_client: Any, path: str, path_params: dict[str, str], timeout: float) -> bytes:
    """GET ``path`` through ``api_client`` (its host, TLS, token, proxy) and return the
    body, undecoded; a non-2xx answer raises ``ApiException`` like the generated APIs do.

    Used for the own Pod instead of ``CoreV1Api.read_namespaced_pod``: kubernetes >= 35
    builds pydantic validators for every method of an API class when its module is
    imported: 11-16 MB more RSS for ``CoreV1Api`` (``benchmarks/agent.py --rules 1000``,
    86.5 -> 71-75 MB against an 80Mi request), to read one field once. Both client
    generations are supported (pyproject allows kubernetes >= 29): >= 35 has
    ``param_serialize`` + ``call_api(method, url, ...)``; older ones
    ``call_api(resource_path, method, ...)`` with ``_preload_content`` (checked with 34.1)."""
    from kubernetes.client.exceptions import ApiException  # lazy: with kubernetes

    headers = {"Accept": "application/json"}
    if hasattr(api_client, "param_serialize"):  # kubernetes >= 35
        request = api_client.param_serialize(
            "GET",
            path,
            path_params=path_params,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(*request, _request_timeout=timeout)
        resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiException.from_response(
                http_resp=resp, body=resp.data.decode("utf-8", "replace"), data=None
            )
        return bytes(resp.data)
    raw = api_client.call_api(  # kubernetes < 35: non-2xx raises in the REST layer
        path,
        "GET",
        path_params,
        [],
        headers,
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=timeout,
    )
    return bytes(raw.data)


def track_sockets(api_client: Any, sockets: weakref.WeakSet[socket.socket]) -> None:
    """Remember every socket the client's connection pools open (urllib3's public
    ``pool_classes_by_scheme`` hook), so a deadline or SIGTERM can shut them down."""
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
