"""The NodeFeature sink's Kubernetes transport: the API client, the requests on its one
object and on its own Pod, each under a total deadline and cut at once by ``abort()``, and
what their failures mean (``SinkError``, transient or not; 404 and 409 as
:class:`ApiStatus` for the state machine in ``nodefeature.py`` to handle).

The sink's requests import ``kubernetes`` here only (lazily, on first use);
``nodefeature_watch.py`` streams the watch on a client this module builds, and
``nodefeature_stale.py`` (not the sink: its own Role) deletes a stale object. Two low-level
helpers on an ``ApiClient``: a raw GET (the own Pod, without the generated API's
validators) and socket tracking (so a deadline or SIGTERM can shut a request's
connections down)."""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from nfd_gpu import boundedfile
from nfd_gpu.names import PREFIX_MAX
from nfd_gpu.sinks import SinkError

GROUP = "nfd.k8s-sigs.io"
VERSION = "v1alpha1"
PLURAL = "nodefeatures"
RESOURCE = f"{PLURAL}.{GROUP}"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
OBJECT_PREFIX = "nfd-gpu-"  # the NodeFeature object is named <prefix><node name>
# A node name is a DNS-1123 subdomain; nfd-gpu-<node> must be an object name (<= 253).
NODE_NAME_MAX = PREFIX_MAX - len(OBJECT_PREFIX)
# The pod's namespace and service-account token (what the kubelet mounts when automount is on)
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
SA_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
NAMESPACE_FILE_MAX = 4096  # a namespace name is at most 63 characters
# The largest NodeFeature sent: etcd refuses a request over 1.5 MiB (--max-request-bytes'
# default); 1 MiB leaves room for what the server adds (managedFields, metadata)
MAX_OBJECT_BYTES = 1024 * 1024
# A write too large for etcd, as kube-apiserver answers it (500): etcd's own refusal over
# --max-request-bytes, and, over 2 MiB, the refusal of kube-apiserver's etcd client (its
# gRPC send limit: "rpc error: code = ResourceExhausted desc = trying to send message
# larger than max (3626726 vs. 2097152)", seen on the real v1.35 control plane of
# tests/e2e/test_size_refusal.py)
TOO_LARGE = ("request is too large", "trying to send message larger than max")

Obj = dict[str, Any]


def object_name(node_name: str | None) -> str:
    """The node's NodeFeature: ``nfd-gpu-<node>``."""
    return f"{OBJECT_PREFIX}{node_name}"


def namespace_fallback() -> str | None:
    """The pod's own namespace (its service-account mount), None outside a pod."""
    try:
        return boundedfile.read_text(SA_NAMESPACE_FILE, NAMESPACE_FILE_MAX).strip() or None
    except OSError:
        return None


def build_api_client(kubeconfig: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient``: kubeconfig if given, else in-cluster, else
    ``~/.kube/config``. urllib3's own retries are off: the sink and the agent back off.
    The client has no timeout of its own: the sink gives each request its ``timeout``."""
    try:
        import kubernetes as _kubernetes  # lazy: heavy import, only for this sink
    except ImportError:
        raise SinkError(
            "the nodefeature output needs the kubernetes client: pip install 'nfd-gpu[kubernetes]'"
        ) from None

    kubernetes: Any = _kubernetes
    cfg = kubernetes.client.Configuration()
    try:
        if kubeconfig:
            # the bounded reader refuses a FIFO, a device or an oversized file first (the
            # client library then opens the file itself)
            boundedfile.read(kubeconfig)
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                kubernetes.config.load_incluster_config(client_configuration=cfg)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(client_configuration=cfg)
    except Exception as e:  # ConfigException, OSError, and what a damaged
        # file raises from the client's reader (YAMLError, TypeError on a non-mapping, ...)
        where = kubeconfig or "in-cluster/~/.kube/config"
        raise SinkError(f"{where}: cannot load Kubernetes client configuration: {e}") from None
    cfg.retries = 0
    return kubernetes.client.ApiClient(cfg)


class TooLarge(SinkError):
    """The object is too large for the server (or for ``MAX_OBJECT_BYTES``): the same
    object is not sent again."""


class ApiStatus(Exception):
    """A 404 or 409 answer: the state machine re-reads, creates or retries."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


def is_object(obj: Any) -> bool:
    """A NodeFeature as a server returns it (a JSON object with a resourceVersion)."""
    if not isinstance(obj, dict):
        return False
    meta = obj.get("metadata")
    return isinstance(meta, dict) and bool(meta.get("resourceVersion"))


class ObjectClient:
    """Requests on ``<namespace>/<name>`` (a NodeFeature) and on the own Pod.

    ``api_client`` None: built from ``kubeconfig`` on the first request. Each request
    has a total deadline of ``timeout`` s; ``abort()`` cuts the ones in flight and makes
    every later one fail at once."""

    def __init__(
        self,
        *,
        namespace: str,
        name: str,
        api_client: Any = None,
        kubeconfig: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.timeout = timeout
        self.aborted = threading.Event()
        self._kubeconfig = kubeconfig
        self._api_client = api_client
        self._custom: Any = None
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    def connect(self) -> Any:
        """The ``CustomObjectsApi``, built on first use (with the ``ApiClient`` when none was
        given)."""
        import kubernetes  # lazy: heavy import, only for this sink

        if self._custom is None:
            if self._api_client is None:
                self._api_client = build_api_client(self._kubeconfig)
            track_sockets(self._api_client, self._sockets)
            self._custom = kubernetes.client.CustomObjectsApi(self._api_client)
        return self._custom

    def watch_client(self) -> Any:
        """A new ``ApiClient`` on the same configuration: the watch's own connection pool
        (cutting a write at its deadline never ends the watch, and the other way round)."""
        import kubernetes  # lazy: with the sink

        self.connect()
        client = kubernetes.client.ApiClient(self._api_client.configuration)
        keepalive(client)
        return client

    def _stopping(self, verb: str) -> SinkError:
        return SinkError(f"{verb} {self.namespace}/{self.name}: stopping")

    def call(self, verb: str, fn: Callable[[], Any], resource: str = RESOURCE) -> Any:
        """Run one API call under the deadline; map failures to SinkError. 404 and 409 are
        raised as :class:`ApiStatus` for the caller to handle."""
        from kubernetes.client.exceptions import ApiException  # lazy: with kubernetes
        from urllib3.exceptions import HTTPError  # lazy: comes with kubernetes

        if self.aborted.is_set():
            raise self._stopping(verb)
        # A total deadline: urllib3's timeout bounds each socket operation, so a server
        # trickling one byte at a time could hold a request forever; when the deadline
        # passes, the connections are shut down and the blocked read ends at once.
        timer = threading.Timer(self.timeout, self.cut_connections)
        timer.daemon = True
        timer.start()
        t0 = time.monotonic()
        try:
            return fn()
        except ApiException as e:
            raise self._refused(verb, resource, e) from None
        except (HTTPError, OSError, ValueError) as e:
            if self.aborted.is_set():
                raise self._stopping(verb) from None
            if time.monotonic() - t0 >= self.timeout:
                raise SinkError(
                    f"API request {verb} {self.namespace}/{self.name} failed: no "
                    f"complete answer within {self.timeout:g} s",
                    transient=True,
                ) from None
            raise SinkError(
                f"API request {verb} {self.namespace}/{self.name} failed: {type(e).__name__}: {e}",
                transient=True,
            ) from None
        finally:
            timer.cancel()

    def _refused(self, verb: str, resource: str, e: Any) -> Exception:
        """What an error answer (``ApiException``) means."""
        status = int(e.status or 0)
        if status in (404, 409):
            return ApiStatus(status, _reason(e))
        where = f"{self.namespace}/{self.name}"
        if status == 403:
            msg = _message(e)
            if "ValidatingAdmissionPolicy" in msg or "admission webhook" in msg:
                # RBAC allowed it; an admission policy (e.g. the shipped one that
                # confines each node's agent to its own NodeFeature) refused it
                return SinkError(f"forbidden by admission policy: {verb} {where} ({msg})")
            return SinkError(
                f"forbidden: the service account needs RBAC verb '{verb}' on {resource} "
                f"in namespace {self.namespace!r} ({msg})"
            )
        if status == 401:
            return SinkError(f"unauthorized: API server rejected the credentials ({verb})")
        if status == 413 or any(m in _message(e) for m in TOO_LARGE):
            # kube-apiserver's body limit (413) or etcd's (500): the same object will be
            # refused again, never a transient failure
            return TooLarge(f"API server refused {verb} {where} as too large: {_message(e)}")
        if status >= 500 or status == 429:
            return SinkError(
                f"API server error {status} on {verb} {where}: {_message(e)}", transient=True
            )
        return SinkError(f"API server rejected {verb} {where} ({status}): {_message(e)}")

    def cut_connections(self) -> None:
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def abort(self) -> None:
        """Cut in-flight requests; later calls fail at once."""
        self.aborted.set()
        self.cut_connections()

    def get(self) -> Obj | None:
        """The object, None when there is none (404)."""
        custom = self.connect()
        args = (GROUP, VERSION, self.namespace, PLURAL, self.name)
        try:
            obj: Obj = self.call(
                "get",
                lambda: custom.get_namespaced_custom_object(*args, _request_timeout=self.timeout),
            )
        except ApiStatus as s:
            if s.status == 404:
                return None
            raise SinkError(f"unexpected {s.status} on get: {s.reason}", transient=True) from None
        if not is_object(obj):
            raise SinkError(
                f"get {self.namespace}/{self.name}: the answer is not a NodeFeature",
                transient=True,
            )
        return obj

    def create(self, body: Obj) -> Any:
        """POST the object; the server's answer (ApiStatus 409: it exists)."""
        custom = self.connect()
        return self._send("create", custom.create_namespaced_custom_object, body)

    def replace(self, body: Obj) -> Any:
        """PUT the object (its ``resourceVersion`` the precondition); the server's answer
        (ApiStatus 409: changed since, 404: deleted)."""
        custom = self.connect()
        return self._send("update", custom.replace_namespaced_custom_object, self.name, body)

    def _send(self, verb: str, method: Callable[..., Any], *args: Any) -> Any:
        """A write: ``method(group, version, namespace, plural, *args)`` under the deadline."""
        return self.call(
            verb,
            functools.partial(
                method, GROUP, VERSION, self.namespace, PLURAL, *args, _request_timeout=self.timeout
            ),
        )

    def own_pod(self, pod_name: str) -> Any:
        """The own Pod, decoded (``ValueError``: not JSON); its body is read inside the
        call, under the request's deadline."""
        self.connect()
        data = self.call(
            "get",
            lambda: get_raw(
                self._api_client,
                "/api/v1/namespaces/{namespace}/pods/{name}",
                {"namespace": self.namespace, "name": pod_name},
                self.timeout,
            ),
            resource="pods",
        )
        return json.loads(data)


def _message(e: Any) -> str:
    try:
        body = json.loads(e.body)
        return str(body.get("message") or e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "reason", "") or e)


def _reason(e: Any) -> str:
    try:
        return str(json.loads(e.body).get("reason") or e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "reason", ""))


def get_raw(
    api_client: Any,
    path: str,
    path_params: dict[str, str],
    timeout: float,
    query: dict[str, str] | None = None,
) -> bytes:
    """GET ``path`` (with ``query``) through ``api_client`` (its host, TLS, token, proxy)
    and return the body, undecoded; a non-2xx answer raises ``ApiException`` like the
    generated APIs do.

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
            query_params=list((query or {}).items()),
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
        list((query or {}).items()),
        headers,
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=timeout,
    )
    return bytes(raw.data)


# TCP keepalive as client-go's dialer asks the kernel for it (30 s idle; Go's own probe
# interval and count, 15 s and 9): a peer gone without a FIN or RST (a lost host, a
# partition) ends the connection after about 3 minutes of silence
KEEPALIVE = ((socket.SO_KEEPALIVE, 1), ("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 15),
             ("TCP_KEEPCNT", 9))  # fmt: skip


def keepalive(api_client: Any) -> None:
    """TCP keepalive on every connection ``api_client``'s pools open (urllib3's
    ``socket_options``, with its default ``TCP_NODELAY`` kept)."""
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
