"""A small Kubernetes API server for tests: NodeFeature objects over real HTTP.

Serves ``/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/<ns>/nodefeatures[/<name>]`` (GET, LIST,
POST, PUT, PATCH, DELETE) and ``/api/v1/namespaces/<ns>/pods/<name>`` (GET) on 127.0.0.1 with a
random port. Like a real API server it:

* assigns ``metadata.resourceVersion`` (one global counter), ``uid``,
  ``creationTimestamp``, ``generation``;
* answers a PUT whose ``resourceVersion`` is stale with 409 Conflict, a PUT without one
  with 422, a POST of an existing name with 409 AlreadyExists, a missing object with 404,
  all as ``Status`` bodies;
* applies a PATCH as a JSON merge patch (RFC 7386, ``application/merge-patch+json``; any
  other type: 415), with its ``metadata.resourceVersion``, if any, as the precondition (409);
* validates every stored object against the NodeFeature ``openAPIV3Schema`` from NFD's CRD
  (``tests/data/nfd/nfd-api-crds.yaml``, a copy of NFD's
  ``deployment/base/nfd-crds/nfd-api-crds.yaml``) and answers 422 on violation.

Test controls: ``deny(verb)`` -> 403, ``fail(verb, status, count)`` -> injected errors,
``delay(verb, seconds, count)`` -> slow answers (client timeouts), ``trickle(verb,
seconds_per_byte, count)`` -> an answer dribbled out one byte at a time (each byte well
inside a socket timeout), ``cut(verb, count)`` -> the write is applied but the answer is
cut off half-way, ``bump(ns, name)`` -> a concurrent writer. ``counts`` tallies requests
per verb, ``object_counts`` per object name.

Watches (``GET .../nodefeatures?watch=true``, verb ``watch``) as a real server streams them:
chunked, one JSON event per line (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``,
``ERROR``), ``fieldSelector=metadata.name=<name>``, ``resourceVersion`` (events after it;
none: the current object as ``ADDED`` first), ``timeoutSeconds``, ``allowWatchBookmarks``
(a bookmark every ``bookmark_every`` seconds). ``compact()`` forgets the history (a resume
from an older version gets ``ERROR`` 410 Gone), ``end_watches()`` ends every open watch,
``vanish()`` deletes an object unseen (history compacted, watches ended).
Foreign writers: ``edit(ns, name, fn)`` (``fn`` changes the stored object) and
``remove(ns, name)``, each producing its event.
"""

from __future__ import annotations

import collections
import json
import os
import re
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import yaml

CRD_PATH = os.path.join(os.path.dirname(__file__), "data", "nfd", "nfd-api-crds.yaml")
NF_PATH = re.compile(
    r"^/apis/nfd\.k8s-sigs\.io/v1alpha1/namespaces/([^/]+)/nodefeatures(?:/([^/]+))?$"
)
MERGE_PATCH = "application/merge-patch+json"
POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")


def nodefeature_schema() -> dict[str, Any]:
    with open(CRD_PATH, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc["metadata"]["name"] == "nodefeatures.nfd.k8s-sigs.io":
                schema: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                return schema
    raise RuntimeError(f"{CRD_PATH}: no NodeFeature CRD")


class FakeKubeAPI:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.clock: Any = time.monotonic  # the time ``log`` records (a test's virtual clock)
        self.log: list[tuple[float, str]] = []  # (clock(), verb) of every request
        self.object_counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.denied: set[str] = set()
        self.failures: dict[str, list[int]] = collections.defaultdict(list)
        self.delays: dict[str, list[float]] = collections.defaultdict(list)
        self.trickles: dict[str, list[float]] = collections.defaultdict(list)
        self.cuts: collections.Counter[str] = collections.Counter()
        self.validator = jsonschema.Draft7Validator(nodefeature_schema())
        self.rejected: list[str] = []
        self.messages: dict[str, str] = {}  # verb -> the message of its injected failures
        self.auth: list[str] = []  # each request's Authorization header
        self._server: ThreadingHTTPServer | None = None
        self.tls = False
        self._thread: threading.Thread | None = None
        self.changed = threading.Condition(self.lock)
        self.history: list[tuple[int, str, dict[str, Any]]] = []  # (rv, type, object)
        self.compacted = 0  # resourceVersions up to this one are forgotten
        self.bookmark_every = 1.0
        self.watch_generation = 0  # end_watches() bumps it
        self.stopping = False

    # -- controls ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def deny(self, verb: str) -> None:
        self.denied.add(verb)

    def allow(self, verb: str) -> None:
        self.denied.discard(verb)

    def fail(self, verb: str, status: int = 500, count: int = 1, message: str = "") -> None:
        with self.lock:
            self.failures[verb].extend([status] * count)
            if message:
                self.messages[verb] = message

    def delay(self, verb: str, seconds: float, count: int = 1) -> None:
        with self.lock:
            self.delays[verb].extend([seconds] * count)

    def trickle(self, verb: str, seconds_per_byte: float, count: int = 1) -> None:
        with self.lock:
            self.trickles[verb].extend([seconds_per_byte] * count)

    def cut(self, verb: str, count: int = 1) -> None:
        with self.lock:
            self.cuts[verb] += count

    def clear_faults(self) -> None:
        with self.lock:
            self.failures.clear()
            self.delays.clear()
            self.trickles.clear()
            self.cuts.clear()
            self.denied.clear()

    def bump(self, namespace: str, name: str) -> None:
        """A concurrent writer: change the stored object's resourceVersion."""
        with self.lock:
            obj = self.objects[(namespace, name)]
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        """Record a change for the watches (caller holds the lock)."""
        self.history.append((self.rv, kind, json.loads(json.dumps(obj))))
        self.changed.notify_all()

    def edit(self, namespace: str, name: str, fn: Any) -> None:
        """A foreign writer changes the stored object (``fn(obj)``)."""
        with self.lock:
            obj = self.objects[(namespace, name)]
            fn(obj)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._event("MODIFIED", obj)

    def remove(self, namespace: str, name: str) -> None:
        """A foreign writer deletes the object."""
        with self.lock:
            obj = self.objects.pop((namespace, name))
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._event("DELETED", obj)

    def compact(self) -> None:
        with self.lock:
            self.rv += 1  # later writes happened and were compacted away
            self.compacted = self.rv
            self.history.clear()

    def vanish(self, namespace: str, name: str) -> None:
        """The object deleted and that history compacted away, every open watch ended:
        what a watch that was down across a compaction misses (its resume gets 410)."""
        with self.lock:
            self.objects.pop((namespace, name), None)
            self.rv += 1
            self.compacted = self.rv
            self.history.clear()
            self.watch_generation += 1
            self.changed.notify_all()

    def end_watches(self) -> None:
        with self.lock:
            self.watch_generation += 1
            self.changed.notify_all()

    def watch_events(self, ns: str, query: dict[str, str], wfile: Any) -> None:
        """Stream one watch (the handler's ``wfile``, chunked) until its timeout."""
        name = query.get("fieldSelector", "").removeprefix("metadata.name=")
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        since = query.get("resourceVersion") or ""
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + self.bookmark_every

        def send(kind: str, obj: dict[str, Any]) -> None:
            data = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            wfile.flush()

        with self.lock:
            generation = self.watch_generation
            if since and int(since) < self.compacted:
                pending: list[tuple[str, dict[str, Any]]] = [
                    ("ERROR", _status(410, "Expired", f"too old resource version: {since}"))
                ]
                deadline = 0.0
                last = self.rv
            elif since:
                last = int(since)
                pending = []
            else:
                obj = self.objects.get((ns, name))
                pending = [("ADDED", json.loads(json.dumps(obj)))] if obj is not None else []
                last = self.rv
        while True:
            for kind, obj in pending:
                send(kind, obj)
            with self.lock:
                pending = []
                now = time.monotonic()
                if self.stopping or generation != self.watch_generation or now >= deadline:
                    break
                fresh = [(rv, k, o) for rv, k, o in self.history if rv > last]
                if not fresh:
                    wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                    self.changed.wait(max(0.0, wait))
                    fresh = [(rv, k, o) for rv, k, o in self.history if rv > last]
                for rv, k, o in fresh:
                    last = rv
                    if o["metadata"].get("namespace") == ns and o["metadata"]["name"] == name:
                        pending.append((k, o))
                if bookmarks and time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + self.bookmark_every
                    pending.append(("BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}}))
                    last = max(last, self.rv)
        wfile.write(b"0\r\n\r\n")
        wfile.flush()

    def add_pod(self, namespace: str, name: str, uid: str, owners: list[dict[str, Any]]) -> None:
        self.pods[(namespace, name)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "ownerReferences": owners,
            },
        }

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self.objects.get((namespace, name))
            return json.loads(json.dumps(obj)) if obj is not None else None

    def writes(self) -> int:
        return self.counts["create"] + self.counts["update"] + self.counts["patch"]

    def reset_counts(self) -> None:
        with self.lock:
            self.counts.clear()
            self.object_counts.clear()

    def kubeconfig(self, path: str) -> str:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {"token": "test-token"}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "current-context": "test",
        }
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(cfg, f)
        return path

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, tls: tuple[str, str] | None = None) -> FakeKubeAPI:
        """Serve on a free loopback port; ``tls``: (certificate, key) PEM files, HTTPS."""
        api = self

        class Handler(_Handler):
            server_api = api

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self.tls = tls is not None
        if tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            self.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- request handling (called by the handler) -------------------------------------
    def handle_watch(self, namespace: str) -> tuple[int, dict[str, Any]]:
        """Count a watch request; its injected fault (403, a status), if any."""
        with self.lock:
            self.counts["watch"] += 1
            self.log.append((self.clock(), "watch"))
            failure = self.failures["watch"].pop(0) if self.failures["watch"] else 0
        if "watch" in self.denied:
            return 403, _status(403, "Forbidden", "nodefeatures is forbidden: cannot watch")
        if failure:
            return failure, _status(failure, "InternalError", "injected failure")
        return 200, {}

    def answer_mode(self, method: str, path: str) -> tuple[float, bool]:
        """(seconds per byte, cut off) for this request's answer; consumes one fault."""
        path = path.split("?", 1)[0]
        m = NF_PATH.match(path)
        if not m:
            return 0.0, False
        verb = {("GET", True): "get", ("POST", False): "create", ("PUT", True): "update",
                ("PATCH", True): "patch"}.get((method, m.group(2) is not None), "")  # fmt: skip
        with self.lock:
            per_byte = self.trickles[verb].pop(0) if self.trickles[verb] else 0.0
            cut = self.cuts[verb] > 0
            if cut:
                self.cuts[verb] -= 1
        return per_byte, cut

    def handle(
        self, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> tuple[int, dict[str, Any]]:
        path = path.split("?", 1)[0]
        m = NF_PATH.match(path)
        pm = POD_PATH.match(path)
        if pm and method == "GET":
            verb, key = "get-pod", (pm.group(1), pm.group(2))
        elif m:
            ns, name = m.group(1), m.group(2)
            verb = {
                ("GET", False): "list",
                ("GET", True): "get",
                ("POST", False): "create",
                ("PUT", True): "update",
                ("PATCH", True): "patch",
                ("DELETE", True): "delete",
            }.get((method, name is not None), "")
            if not verb:
                return 405, _status(405, "MethodNotAllowed", f"{method} not allowed")
            key = (ns, name or (body or {}).get("metadata", {}).get("name", ""))
        else:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        with self.lock:
            self.counts[verb] += 1
            self.log.append((self.clock(), verb))
            self.object_counts[key] += 1
            delay = self.delays[verb].pop(0) if self.delays[verb] else 0.0
            failure = self.failures[verb].pop(0) if self.failures[verb] else 0
        if delay:
            time.sleep(delay)
        if verb in self.denied:
            return 403, _status(403, "Forbidden", f"nodefeatures is forbidden: cannot {verb}")
        if failure:
            msg = self.messages.get(verb, "injected failure")
            return failure, _status(failure, "InternalError", msg)
        if verb == "patch" and content_type.split(";")[0].strip() != MERGE_PATCH:
            return 415, _status(415, "UnsupportedMediaType", f"unsupported {content_type!r}")
        with self.lock:
            return self._dispatch(verb, key, body)

    def _dispatch(self, verb: str, key: tuple[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        ns, name = key
        if verb == "get-pod":
            pod = self.pods.get(key)
            if pod is None:
                return 404, _status(404, "NotFound", f'pods "{name}" not found')
            return 200, pod
        if verb == "list":
            items = [o for (n, _), o in sorted(self.objects.items()) if n == ns]
            return 200, {
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeatureList",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        if verb == "get":
            obj = self.objects.get(key)
            if obj is None:
                return 404, _status(404, "NotFound", f'nodefeatures "{name}" not found')
            return 200, obj
        if verb == "delete":
            gone = self.objects.pop(key, None)
            if gone is None:
                return 404, _status(404, "NotFound", f'nodefeatures "{name}" not found')
            self.rv += 1
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self._event("DELETED", gone)
            return 200, _status(200, "", "deleted")
        if not isinstance(body, dict):
            return 400, _status(400, "BadRequest", "body must be a JSON object")
        if verb == "patch":  # the stored object with the patch applied, then as an update
            cur = self.objects.get(key)
            if cur is None:
                return 404, _status(404, "NotFound", f'nodefeatures "{name}" not found')
            sent = (body.get("metadata") or {}).get(
                "resourceVersion", cur["metadata"]["resourceVersion"]
            )
            if sent != cur["metadata"]["resourceVersion"]:
                return 409, _conflict(name)
            body = apply_merge_patch(json.loads(json.dumps(cur)), body)
            verb = "update"
        meta = body.get("metadata") or {}
        if meta.get("namespace", ns) != ns or (verb == "update" and meta.get("name") != name):
            return 400, _status(400, "BadRequest", "metadata does not match the URL")
        errors = sorted(self.validator.iter_errors(body), key=lambda e: list(e.path))
        if errors or body.get("kind") != "NodeFeature" or not meta.get("name"):
            msg = "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)
            self.rejected.append(msg or "kind/name")
            return 422, _status(422, "Invalid", f"NodeFeature is invalid: {msg or 'kind/name'}")
        if verb == "create":
            if key in self.objects:
                return 409, _status(409, "AlreadyExists", f'nodefeatures "{name}" already exists')
            self.rv += 1
            obj = json.loads(json.dumps(body))
            obj["metadata"].update(
                namespace=ns,
                resourceVersion=str(self.rv),
                uid=str(uuid.uuid4()),
                generation=1,
                creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            self.objects[key] = obj
            self._event("ADDED", obj)
            return 201, obj
        # update
        cur = self.objects.get(key)
        if cur is None:
            return 404, _status(404, "NotFound", f'nodefeatures "{name}" not found')
        sent_rv = meta.get("resourceVersion")
        if not sent_rv:
            return 422, _status(
                422, "Invalid", "metadata.resourceVersion: Invalid value: must be specified"
            )
        if sent_rv != cur["metadata"]["resourceVersion"]:
            return 409, _conflict(name)
        self.rv += 1
        obj = json.loads(json.dumps(body))
        obj["metadata"].update(
            resourceVersion=str(self.rv),
            uid=cur["metadata"]["uid"],
            creationTimestamp=cur["metadata"]["creationTimestamp"],
            generation=cur["metadata"]["generation"] + (obj.get("spec") != cur.get("spec")),
        )
        self.objects[key] = obj
        self._event("MODIFIED", obj)
        return 200, obj


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` applied to ``target``; an object merges key by key, null removes."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out


def _conflict(name: str) -> dict[str, Any]:
    return _status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on nodefeatures "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
    )


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # clients closing keep-alive connections are not errors


class _Handler(BaseHTTPRequestHandler):
    server_api: FakeKubeAPI
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two sends: without NODELAY, delayed ACKs cost 40 ms each
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def _watch(self) -> bool:
        """A watch request: streamed here (True), or not a watch (False)."""
        path, _, qs = self.path.partition("?")
        query = dict(urllib.parse.parse_qsl(qs))
        m = NF_PATH.match(path)
        if self.command != "GET" or not m or m.group(2) or query.get("watch") not in ("true", "1"):
            return False
        code, payload = self.server_api.handle_watch(m.group(1))
        try:
            if code != 200:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            self.server_api.watch_events(m.group(1), query, self.wfile)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        return True

    def _serve(self) -> None:
        self.server_api.auth.append(self.headers.get("Authorization") or "")
        if self._watch():
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            code, payload = 400, _status(400, "BadRequest", "invalid JSON")
        else:
            kind = self.headers.get("Content-Type") or ""
            code, payload = self.server_api.handle(self.command, self.path, body, kind)
        per_byte, cut = self.server_api.answer_mode(self.command, self.path)
        data = json.dumps(payload).encode()
        try:
            if per_byte or cut:
                self._odd_answer(code, data, per_byte, cut)
                return
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _odd_answer(self, code: int, data: bytes, per_byte: float, cut: bool) -> None:
        head = (
            f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        if cut:
            self.wfile.write(head + data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.request.shutdown(socket.SHUT_RDWR)
            return
        for i in range(len(head) + len(data)):
            self.wfile.write((head + data)[i : i + 1])
            self.wfile.flush()
            time.sleep(per_byte)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve


@contextmanager
def running() -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI().start()
    try:
        yield api
    finally:
        api.stop()
