"""The NodeFeature sink's Kubernetes transport: the API client, the requests on its object and Pod.

Each request has a total deadline and is cut at once by ``abort()``. Failures map to
``SinkError``, transient or not. 404 and 409 are :class:`ApiStatus`, for the state machine
in ``nodefeature.py`` to handle. The sink's requests import the kubernetes client here
only, lazily, on first use. They import only the modules they use, by
:func:`client_modules`: the configuration, its loaders, the ``ApiClient`` and its REST
layer. Not the packages' ``__init__``: those import every part of the client.
``nodefeature_watch.py`` streams the watch on a client this module builds.
``nodefeature_stale.py`` deletes a stale object with its own Role, not the sink's. Every
request is :func:`request` on an ``ApiClient``. The generated API classes build pydantic
validators and import models the agent never uses. Sockets are tracked (``kubesockets.py``),
so a deadline or SIGTERM can shut a request's connections down.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from nfd_gpu import lazypkg
from nfd_gpu.host import boundedfile
from nfd_gpu.names import PREFIX_MAX
from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.deadlines import DEADLINES
from nfd_gpu.sinks.kubesockets import keepalive, track_sockets

GROUP = "nfd.k8s-sigs.io"
VERSION = "v1alpha1"
PLURAL = "nodefeatures"
RESOURCE = f"{PLURAL}.{GROUP}"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
COLLECTION_PATH = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
OBJECT_PATH = COLLECTION_PATH + "/{name}"
MERGE_PATCH = "application/merge-patch+json"  # RFC 7386, which custom resources accept
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
    """The pod's own namespace from its service-account mount; None outside a pod."""
    try:
        return boundedfile.read_text(SA_NAMESPACE_FILE, NAMESPACE_FILE_MAX).strip() or None
    except OSError:
        return None


# The packages whose ``__init__`` imports every part of the client (``kubernetes``: config,
# dynamic, watch, stream, utils, leaderelection, informer; ``kubernetes.utils``: the YAML
# loader and the metrics helpers; ``kubernetes.config``: the kubeconfig reader with
# requests-oauthlib, which an in-cluster client never uses). :func:`client_modules` leaves
# them unrun (nfd_gpu/lazypkg.py): the agent imports only the modules it calls.
LAZY_PACKAGES = ("kubernetes", "kubernetes.utils", "kubernetes.config")
# ``kubernetes.client.configuration`` imports ``multiprocessing`` only for ``cpu_count()``,
# the default pool size of a ``Configuration()`` given none: its package ``__init__`` (its
# context module, with ``multiprocessing.process``, ``reduction``, ``pickle`` ...) costs
# the agent's start ~3 ms. :func:`new_configuration` gives the size, so the package is
# registered unrun too; a ``Configuration()`` made elsewhere runs it on first use.
DEFERRED_STDLIB = ("multiprocessing",)
# connections a pool keeps to the API server: the agent's client has one request out at a
# time (a write, a read, a Pod's read), its watch another on its own pool
POOL_MAXSIZE = 4
# urllib3's HTTP/2 package, whose ``__init__`` imports ``importlib.metadata`` (with zipfile,
# csv, importlib.resources: ~8 ms of the agent's start) for its opt-in h2 support, which the
# agent never turns on: its connection module runs ``from .http2 import probe``, the probe
# alone is imported
URLLIB3_HTTP2 = ("urllib3.http2", ("probe",))


def client_modules() -> Any:
    """What the agent uses of the kubernetes client, as attributes of one namespace.

    - They are imported without the packages' eager ``__init__``, :data:`LAZY_PACKAGES`
      and :data:`DEFERRED_STDLIB`.
    - ``Configuration`` and its REST layer ``RESTClientObject``, for TLS, client
      certificates, proxy, the urllib3 pool; ``ApiException``, ``ConfigException``, the two
      configuration loaders.
    - ``ImportError`` when the client is not installed.
    """
    import types

    with lazypkg.LOCK:
        for pkg in LAZY_PACKAGES:
            lazypkg.lazy_package(pkg)
        for pkg in DEFERRED_STDLIB:
            with contextlib.suppress(ImportError):  # blocked or absent: imported as usual
                lazypkg.lazy_package(pkg)
        with contextlib.suppress(ImportError):  # urllib3 < 2.3 has no HTTP/2 package
            lazypkg.lazy_package(*URLLIB3_HTTP2)
        try:
            from kubernetes.client.configuration import Configuration
            from kubernetes.client.exceptions import ApiException
            from kubernetes.client.rest import RESTClientObject
            from kubernetes.config.config_exception import ConfigException
            from kubernetes.config.incluster_config import load_incluster_config
        finally:
            lazypkg.attach(URLLIB3_HTTP2[0])  # urllib3 is imported now (if it imports)

    def load_kube_config(**kwargs: Any) -> None:
        # requests-oauthlib and the exec provider: only for a kubeconfig file
        import kubernetes.config.kube_config as kube_config

        load: Any = kube_config.load_kube_config
        load(**kwargs)

    return types.SimpleNamespace(
        Configuration=Configuration,
        RESTClientObject=RESTClientObject,
        ApiException=ApiException,
        ConfigException=ConfigException,
        load_incluster_config=load_incluster_config,
        load_kube_config=load_kube_config,
    )


def new_configuration() -> Any:
    """A client ``Configuration`` with the pool size :data:`POOL_MAXSIZE`.

    - kubernetes >= 35 takes it in the constructor. Without it, it asks
      ``multiprocessing.cpu_count()`` for ``cpu_count * 5``.
    - Older clients take no such argument and set ``cpu_count * 5`` themselves. The size is
      set after, so the pool is the same size with either.
    """
    configuration = client_modules().Configuration
    if "connection_pool_maxsize" in configuration.__init__.__code__.co_varnames:
        cfg = configuration(connection_pool_maxsize=POOL_MAXSIZE)
    else:
        cfg = configuration()
        cfg.connection_pool_maxsize = POOL_MAXSIZE
    return cfg


class Transport:
    """The kubernetes client's ``Configuration`` and REST layer, which :func:`request` goes through.

    The client's ``ApiClient`` is not used. It imports pydantic and the models' package for
    its generic serializer, and every request here is JSON the sink builds and checks.
    ``configuration`` and ``rest_client`` are as on an ``ApiClient``. A new one on the same
    configuration has its own connection pool.
    """

    def __init__(self, configuration: Any) -> None:
        self.configuration = configuration
        self.rest_client = client_modules().RESTClientObject(configuration)


def api_exception() -> Any:
    """The client's ``ApiException`` class, which a non-2xx answer raises."""
    return client_modules().ApiException


def build_api_client(kubeconfig: str | None = None) -> Any:
    """The client's :class:`Transport`, for kubernetes >= 35; before, its ``ApiClient``.
    Kubeconfig if given, else in-cluster, else ``~/.kube/config``. urllib3's own retries are
    off: the sink and the agent back off. The client has no timeout of its own: the sink
    gives each request its ``timeout``."""
    try:
        k = client_modules()
    except ImportError:
        raise SinkError(
            "the nodefeature output needs the kubernetes client: pip install 'nfd-gpu[kubernetes]'"
        ) from None

    cfg = new_configuration()
    try:
        if kubeconfig:
            # the bounded reader refuses a FIFO, a device or an oversized file first (the
            # client library then opens the file itself)
            boundedfile.read(kubeconfig)
            k.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            try:
                k.load_incluster_config(client_configuration=cfg)
            except k.ConfigException:
                k.load_kube_config(client_configuration=cfg)
    except Exception as e:  # ConfigException, OSError, and what a damaged
        # file raises from the client's reader (YAMLError, TypeError on a non-mapping, ...)
        where = kubeconfig or "in-cluster/~/.kube/config"
        raise SinkError(f"{where}: cannot load Kubernetes client configuration: {e}") from None
    cfg.retries = 0
    return client_for(cfg)


def client_for(configuration: Any) -> Any:
    """The client the requests go through for a loaded ``Configuration``: a :class:`Transport`.
    With kubernetes < 35 it is the ``ApiClient``, which has no pydantic."""
    if legacy_rest(client_modules().RESTClientObject):
        from kubernetes.client.api_client import ApiClient

        return ApiClient(configuration)
    return Transport(configuration)


def legacy_rest(rest_client_class: Any) -> bool:
    """The REST layer of kubernetes < 35, python-legacy's: ``_preload_content``, non-2xx raised
    there. :func:`build_api_client` keeps the client's ``ApiClient`` for it."""
    return "_preload_content" in rest_client_class.request.__code__.co_varnames


class TooLarge(SinkError):
    """Too large for the server or for ``MAX_OBJECT_BYTES``: the same object is not sent again."""


class Forbidden(SinkError):
    """A 403 whose message names no admission policy or webhook: RBAC, the Role lacks the verb."""


class ApiStatus(Exception):
    """A 404 or 409 answer: the state machine re-reads, creates or retries."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason


def is_object(obj: Any) -> bool:
    """A NodeFeature as a server returns it: a JSON object with a resourceVersion."""
    if not isinstance(obj, dict):
        return False
    meta = obj.get("metadata")
    return isinstance(meta, dict) and bool(meta.get("resourceVersion"))


class ObjectClient:
    """Requests on ``<namespace>/<name>``, a NodeFeature, and on the own Pod.

    With ``api_client`` None, it is built from ``kubeconfig`` on the first request. Each
    request has a total deadline of ``timeout`` s. ``abort()`` cuts the ones in flight and
    makes every later one fail at once.
    """

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
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    def connect(self) -> Any:
        """The ``ApiClient``, built on first use when none was given, its sockets tracked."""
        if self._api_client is None:
            self._api_client = build_api_client(self._kubeconfig)
        track_sockets(self._api_client, self._sockets)
        return self._api_client

    def watch_client(self) -> Any:
        """A new ``ApiClient`` on the same configuration: the watch's own connection pool.
        Cutting a write at its deadline never ends the watch, and the other way round."""
        api_client = self.connect()
        client = type(api_client)(api_client.configuration)  # a Transport or an ApiClient
        keepalive(client)
        return client

    def _stopping(self, verb: str) -> SinkError:
        return SinkError(f"{verb} {self.namespace}/{self.name}: stopping")

    def call(self, verb: str, fn: Callable[[], Any], resource: str = RESOURCE) -> Any:
        """Run one API call under the deadline; map failures to SinkError. 404 and 409 are
        raised as :class:`ApiStatus` for the caller to handle."""
        from urllib3.exceptions import HTTPError  # lazy: comes with kubernetes

        ApiException = api_exception()
        if self.aborted.is_set():
            raise self._stopping(verb)
        # A total deadline: urllib3's timeout bounds each socket operation, so a server
        # trickling one byte at a time could hold a request forever; when the deadline
        # passes, the connections are shut down and the blocked read ends at once.
        deadline = DEADLINES.arm(self.timeout, self.cut_connections)
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
            deadline.disarm()

    def _refused(self, verb: str, resource: str, e: Any) -> Exception:
        """What an error answer, an ``ApiException``, means."""
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
            return Forbidden(
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
        """The object; None when there is none, a 404."""
        api_client = self.connect()
        try:
            obj: Obj = self.call(
                "get",
                lambda: json.loads(
                    request(api_client, "GET", OBJECT_PATH, self._where(), self.timeout)
                ),
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

    def _where(self, name: bool = True) -> dict[str, str]:
        """The path parameters of the object; with ``name=False``, of its collection."""
        where = {"group": GROUP, "version": VERSION, "namespace": self.namespace,
                 "plural": PLURAL}  # fmt: skip
        return {**where, "name": self.name} if name else where

    def create(self, body: Obj) -> Any:
        """POST the object; the server's answer. ApiStatus 409 means it exists."""
        return self._send("create", "POST", COLLECTION_PATH, self._where(name=False), body)

    def replace(self, body: Obj) -> Any:
        """PUT the object with its ``resourceVersion`` as the precondition; the server's answer.
        ApiStatus 409 means changed since, 404 deleted."""
        return self._send("update", "PUT", OBJECT_PATH, self._where(), body)

    def patch(self, patch: Obj) -> Any:
        """PATCH the object with a JSON merge patch; the server's answer. With
        ``metadata.resourceVersion`` in ``patch``, ApiStatus 409 means changed since."""
        return self._send("patch", "PATCH", OBJECT_PATH, self._where(), patch, MERGE_PATCH)

    def _send(
        self,
        verb: str,
        method: str,
        path: str,
        where: dict[str, str],
        body: Obj,
        content_type: str = "application/json",
    ) -> Any:
        """A write under the deadline: the server's answer, decoded."""
        api_client = self.connect()
        kw: dict[str, Any] = {"body": body, "content_type": content_type}
        return self.call(
            verb, lambda: json.loads(request(api_client, method, path, where, self.timeout, **kw))
        )

    def own_pod(self, pod_name: str) -> Any:
        """The own Pod, decoded; ``ValueError`` when not JSON.
        Its body is read inside the call, under the request's deadline."""
        self.connect()
        data = self.call(
            "get",
            lambda: request(
                self._api_client,
                "GET",
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
    """GET ``path`` with ``query``: :func:`request`'s body."""
    return request(api_client, "GET", path, path_params, timeout, query=query)  # type: ignore[no-any-return]


def request(
    api_client: Any,
    method: str,
    path: str,
    path_params: dict[str, str],
    timeout: Any,
    *,
    query: dict[str, str] | None = None,
    body: Obj | None = None,
    content_type: str = "application/json",
    stream: bool = False,
) -> Any:
    """One request through ``api_client``, with its host, TLS, token and proxy.

    It returns the body undecoded, or with ``stream`` the urllib3 response, its body unread.
    A non-2xx answer raises ``ApiException`` as the generated APIs do. ``body`` is sent as
    JSON, of ``content_type``: a JSON merge patch is ``application/merge-patch+json``.

    Every request of the agent goes through here, not the generated API classes such as
    ``CustomObjectsApi`` and ``CoreV1Api``. kubernetes >= 35 builds pydantic validators for
    the methods of an API class, and its module imports the models it names. That is
    11-16 MB more RSS for ``CoreV1Api`` to read one field once. ``benchmarks/agent.py
    --rules 1000`` measured 86.5 -> 71-75 MB against an 80Mi request. What these requests
    send and read is checked here and by the sink, ``is_object``.

    Both client generations are supported; pyproject allows kubernetes >= 29. >= 35 has
    ``param_serialize`` + ``call_api(method, url, ...)``. Older ones have
    ``call_api(resource_path, method, ...)`` with ``_preload_content``, checked with 34.1.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    if isinstance(api_client, Transport):
        resp = _send_on(api_client, method, path, path_params, query, headers, body, timeout)
    elif hasattr(api_client, "param_serialize"):  # an ApiClient, kubernetes >= 35
        serialized = api_client.param_serialize(
            method,
            path,
            path_params=path_params,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(*serialized, _request_timeout=timeout)
    else:  # an ApiClient, kubernetes < 35: non-2xx raises in the REST layer
        raw = api_client.call_api(
            path,
            method,
            path_params,
            list((query or {}).items()),
            headers,
            body=body,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=timeout,
        )
        return raw if stream else bytes(raw.data)
    if not 200 <= resp.status <= 299:
        resp.read()
        raise api_exception().from_response(
            http_resp=resp, body=resp.data.decode("utf-8", "replace"), data=None
        )
    if stream:
        return resp.response
    resp.read()
    return bytes(resp.data)


def _send_on(
    transport: Transport,
    method: str,
    path: str,
    path_params: dict[str, str],
    query: dict[str, str] | None,
    headers: dict[str, str],
    body: Obj | None,
    timeout: Any,
) -> Any:
    """One request on the REST layer, as the client's ``ApiClient.param_serialize`` builds it.
    The path parameters are quoted and the query encoded. The configuration's bearer token
    goes in ``authorization``. Its refresh hook runs, so an in-cluster token is re-read as it
    rotates. The REST layer sends ``body`` as JSON. It returns the ``RESTResponse``, read or not."""
    from urllib.parse import quote, urlencode

    cfg = transport.configuration
    safe = getattr(cfg, "safe_chars_for_path_param", "")
    for k, v in path_params.items():
        path = path.replace(f"{{{k}}}", quote(str(v), safe=safe))
    url = cfg.host + path + (f"?{urlencode(list(query.items()))}" if query else "")
    headers = {"User-Agent": f"nfd-gpu/{_version()}", **headers}
    for auth in cfg.auth_settings().values():
        if auth.get("in") == "header" and auth.get("value"):
            headers[auth["key"]] = auth["value"]
    return transport.rest_client.request(
        method, url, headers=headers, body=body, _request_timeout=timeout
    )


def _version() -> str:
    from nfd_gpu import __version__

    return __version__
