"""A watch on the agent's own NodeFeature, by name, on a background thread.

The NodeFeature sink, ``nodefeature.py``, writes ``<namespace>/nfd-gpu-<node>``. This
watch tells it within a second when the object is deleted, edited or relabelled behind
its back, so the agent can restore it. docs/reliability.md, "The published object", says
more.

One request per watch: ``GET .../nodefeatures?watch=true&fieldSelector=metadata.name=<name>
&resourceVersion=<rv>&allowWatchBookmarks=true&timeoutSeconds=<T>``.

- T is the resync interval, by default 1 h, jittered -10 %..+0 %.
- The server ends the watch after T.
- The next one resumes from the last ``resourceVersion`` seen, an event's or a bookmark's.
- So a quiet object costs about one request per hour.

``410 Gone``, as client-go's reflector reads it:

- A 410 is ordinary on a watch resumed from a version a stream of this watch gave or ran
  on. The server's history was compacted; the watch cache moved on.
- The watch then restarts at once from "now". The events in between are lost once.
- It does not re-read the object for that. A watch without ``resourceVersion`` starts
  with the object as a synthetic ``ADDED`` event: the API's "get state and start at most
  recent". That is the object's state, handed to the sink like any other event.
- Only when that watch says nothing of the object is the sink told ``EXPIRED``. It then
  re-reads the object once with a GET. Nothing is said when the first event is a
  bookmark, or when ``STATE_WAIT`` s pass: the object is absent, or the server does not
  send the initial state.
- So an object deleted while the history was lost is found and restored within
  ``STATE_WAIT`` s of the watch running again.
- Some 410s are failures, not a new expiry: on a watch that started from "now", or from a
  version the sink just read or wrote, before any stream ran on it. A fresh version is not
  compacted away, so a broken proxy or a misbehaving server is to blame. There is no
  re-read, only the back-off below.

Failures reconnect with a jittered back-off. A failure is a refused connection, a 5xx, a
cut or stalled stream, such a 410, or a stream that ended early.

- The first failure of a run, after a stream that worked, retries within ``FAST_RETRY``:
  0.5-1 s. So a blip, such as an apiserver restart behind a load balancer, costs a second.
- Every later one retries after ``backoff_cap``: 60 s, +0..20 %.
- Every watch request also keeps to a budget, whatever the path, an ordinary 410's
  restart included: at most ``BUDGET`` requests in any ``backoff_cap`` seconds.
- So a persistent fault costs at most 2 requests in any minute, about 1 a minute once it
  lasts. Such a fault is every watch refused or answered 410, the apiserver down, or a
  partition.
- The sink then sends none: no re-read without a stream that opened.
- Both scale down with a resync interval under 60 s, for tests.
- The first failure of a run is a warning, then every tenth, and the recovery is said.
- ``403``, a Role without the ``watch`` verb, is logged once. The sink then falls back to
  its periodic re-read, and ``/readyz`` says so. The watch is retried after one resync
  interval.

A watch that is silently dead is found as client-go finds it. Such a watch has a
half-open connection: a partition, a lost apiserver host, a conntrack drop.

- TCP keepalive runs on the watch's connections, by ``kubeclient.watch_client``.
- A deadline comes from the bookmarks. The server, kube-apiserver's watch cache, sends one
  about every minute.
- No byte for ``STALL_BOOKMARKS`` times the gap between the bookmarks seen on this stream
  ends the stream as a failure. Before two are seen, the gap is ``DEFAULT_STALL``.
- The watch then resumes on a new connection.
- ``quiet_for()`` tells the sink how long nothing was heard. Its resync GET stays a safety
  net for a watch that is not heard from.
- A watch that cannot be opened for a resync interval, after a lost history too, is
  backed by one GET per interval.

The watch has its own connection pool: its own ``ApiClient`` on the same configuration.
Cutting a write's connections at its deadline never ends the watch, and stopping the
watch never cuts a write.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import random
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from nfd_gpu.sinks.kubeclient import COLLECTION_PATH, api_exception, request
from nfd_gpu.sinks.watchlines import WatchStop, event_head, stream_lines

log = logging.getLogger("nfd_gpu.sinks.nodefeature")

Obj = dict[str, Any]
# (event type, object): ADDED, MODIFIED, DELETED; "EXPIRED" (obj None): the history was
# lost (410) and the restarted watch could not tell the object's state: re-read it once
OnEvent = Callable[[str, "Obj | None"], None]
# whether a resourceVersion is that of one of the sink's own writes: its event, the echo,
# needs no object (the sink ignores it), so only the object's metadata is decoded
IsEcho = Callable[[str], bool]

FAST_RETRY = (0.5, 1.0)  # the first retry after a stream that worked
BUDGET = 2  # watch requests in any backoff_cap seconds
STATE_WAIT = 5.0  # after a lost history: the object as ADDED within this, or a re-read
BOOKMARK_PERIOD = 60.0  # kube-apiserver's watch cache: a bookmark to each watcher per minute
DEFAULT_STALL = 2 * BOOKMARK_PERIOD + 10.0  # silence that ends a stream before 2 bookmarks
STALL_BOOKMARKS = 3.0  # then: silence of this many bookmark gaps
MIN_STALL = 2.0
WORKED = 60.0  # a stream that lasted this long (or 1/4 of its duration) was working


_LIVE: weakref.WeakSet[OwnObjectWatch] = weakref.WeakSet()


def _stop_all() -> None:
    """At exit, end every watch thread before the interpreter finalizes.

    A daemon thread still inside the client's code then can abort the process.
    """
    for w in list(_LIVE):
        w.stop(join=1.0)


atexit.register(_stop_all)


class Expired(Exception):
    """The server no longer has the resourceVersion to resume from: 410 Gone.

    - The version is one a stream gave or ran on.
    - It is an ordinary event: a quiet object, a compacted history.
    - The watch restarts at once from "now".
    """


class Gone(Exception):
    """410 Gone on a watch from "now" or from a version just read or written.

    No stream ran on that version yet. It is a failure, backed off, not an expiry.
    """


class OwnObjectWatch:
    """Watches one object; ``on_event`` runs on the watch thread for every change."""

    def __init__(
        self,
        *,
        api_client: Any,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        name: str,
        on_event: OnEvent,
        is_echo: IsEcho | None = None,
        duration: float,
        timeout: float,
        backoff_cap: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self._api_client = api_client
        self._target = (group, version, namespace, plural)
        self.name = name
        self.on_event = on_event
        self.is_echo = is_echo
        self.duration = max(1.0, duration)
        self.timeout = timeout
        self.backoff_cap = backoff_cap
        self.rng = rng or random.Random()
        self.state_wait = STATE_WAIT
        self.resource_version: str | None = None
        # resource_version came from a stream, or a stream resumed from it ran: a 410 on
        # it is then an ordinary expiry (else a failure)
        self._rv_streamed = False
        self._unsure = False  # the history was lost: the state is the next stream's ADDED
        self._state_timer: threading.Timer | None = None
        self._stream = 0  # streams opened, for the state timer
        self._requests: deque[float] = deque(maxlen=BUDGET)  # when the last ones were sent
        self.forbidden = False  # the last attempt was refused (403): the sink re-reads
        self._stop = threading.Event()
        self._resp: Any = None
        # re-entrant: SIGTERM's abort() may run inside a stop() on the same thread
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self.heard_at = time.monotonic()  # the last byte of a stream (or its start)
        self._failing = 0  # failures in a row, for the log

    def quiet_for(self) -> float:
        """Seconds since the watch last heard from the server: a stream opened, or a byte."""
        return time.monotonic() - self.heard_at

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, resource_version: str | None) -> None:
        if self._thread is not None:
            return
        self.resource_version = resource_version or None
        self._rv_streamed = False  # the sink's read or write: fresh
        self._thread = threading.Thread(target=self._run, name="nodefeature-watch", daemon=True)
        _LIVE.add(self)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stop.is_set()

    def stop(self, join: float = 0.0) -> None:
        """End the watch, shutting its stream down; wait up to ``join`` s for the thread."""
        self._stop.set()
        with self._lock:
            resp = self._resp
            self._cancel_state_timer()
        if resp is not None:
            _shutdown(resp)
        thread = self._thread
        if join and thread is not None and thread is not threading.current_thread():
            thread.join(join)

    # -- the loop -----------------------------------------------------------------------
    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if self._pause(self._budget_wait()):
                return
            t0 = time.monotonic()
            self._requests.append(t0)
            try:
                ended_normally = self._watch_once()
            except WatchStop:
                return
            except Expired:  # ordinary: restart from "now" at once (within the budget)
                log.info("NodeFeature %s: watch history expired, restarting", self.name)
                continue
            except Exception as e:  # any failure, a 410 on a fresh watch too: back off
                if self._stop.is_set():
                    return
                if self._worked(t0):  # a stream that lasted: this failure starts a run
                    failures = 0
                    self._recovered()
                failures += 1
                delay = self._backoff(failures)
                self._failed(e, delay)
                if self._pause(delay):
                    return
                continue
            if self.forbidden:
                failures = 0
                if self._pause(self.duration):
                    return
                continue
            # a watch the server ended early (< 1/4 of its duration, < WORKED) counts as a
            # failure: a proxy that cuts idle streams must not make it a request loop
            if ended_normally and self._worked(t0):
                failures = 0
                self._recovered()
                delay = self.rng.uniform(0.0, 0.5)
            else:
                failures += 1
                delay = self._backoff(failures)
                self._failed(RuntimeError("the server ended the watch early"), delay)
            if self._pause(delay):
                return

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``; True when the watch was stopped, meanwhile or before."""
        if seconds <= 0:
            return self._stop.is_set()
        return self._stop.wait(seconds)

    def _window(self) -> float:
        """The back-off's cap and the budget's window: 60 s, less under a short resync."""
        return min(self.backoff_cap, self.duration)

    def _budget_wait(self) -> float:
        """Seconds until the next request keeps to BUDGET requests in any window."""
        if len(self._requests) < BUDGET:
            return 0.0
        return max(0.0, self._requests[0] + self._window() - time.monotonic())

    def _worked(self, t0: float) -> bool:
        """The stream opened at ``t0`` lasted long enough to count as working."""
        return time.monotonic() - t0 >= min(self.duration / 4, WORKED)

    def _failed(self, e: Exception, delay: float) -> None:
        """Log the first failure of a run, then every tenth."""
        self._failing += 1
        n = self._failing
        if n == 1 or n % 10 == 0:
            log.warning(
                "NodeFeature %s: watch failed (%s; %d in a row), reconnecting in %.1f s",
                self.name, _one_line(e), n, delay,
            )  # fmt: skip

    def _recovered(self) -> None:
        if self._failing > 1:
            log.info("NodeFeature %s: watch working again after %d failures", self.name,
                     self._failing)  # fmt: skip
        self._failing = 0

    def _backoff(self, failures: int) -> float:
        """The back-off of a failure, jittered up so that two retries never fit in one window.

        - The first failure after a stream that worked: FAST_RETRY.
        - Later ones: the cap, 60 s.
        """
        cap = self._window()
        if failures <= 1:
            return min(cap, self.rng.uniform(*FAST_RETRY))
        return float(cap * self.rng.uniform(1.0, 1.2))

    def _gone(self) -> Exception:
        """Handle a 410: an ordinary expiry or a failure.

        - Expired when the version came from a stream or a stream ran on it.
        - Else Gone, a failure.
        - Either way the next watch starts from "now".
        - The object's state is then unknown until that watch tells it: ``_unsure``.
        """
        ordinary = self._rv_streamed
        if self.resource_version is not None:
            self._unsure = True
        self.resource_version = None
        self._rv_streamed = False
        if ordinary:
            return Expired()
        return Gone("410 Gone on a watch from a fresh version or from now")

    def _state_known(self) -> None:
        with self._lock:
            self._unsure = False
            self._cancel_state_timer()

    def _state_unknown(self, stream: int) -> None:
        """The restarted watch did not tell the object's state; the sink re-reads it, once.

        Its first event was a bookmark, or ``state_wait`` passed.
        """
        with self._lock:
            if not self._unsure or stream != self._stream or self._stop.is_set():
                return
            self._unsure = False
            self._cancel_state_timer()
        self.on_event("EXPIRED", None)

    def _cancel_state_timer(self) -> None:
        """Cancel the state timer; the caller holds the lock."""
        if self._state_timer is not None:
            self._state_timer.cancel()
            self._state_timer = None

    def _open(self) -> Any:
        """Send the watch request; the response, its body unread; raises on non-2xx."""
        ApiException = api_exception()
        seconds = max(1, math.ceil(self.duration * self.rng.uniform(0.9, 1.0)))
        group, version, namespace, plural = self._target
        query = {"allowWatchBookmarks": "true", "fieldSelector": f"metadata.name={self.name}"}
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        query.update(timeoutSeconds=str(seconds), watch="true")
        where = {"group": group, "version": version, "namespace": namespace, "plural": plural}
        try:
            return request(
                self._api_client,
                "GET",
                COLLECTION_PATH,
                where,
                # connect within the request timeout; a read waits at most DEFAULT_STALL
                # (then the bookmarks' deadline, _watch_once)
                (self.timeout, min(seconds + self.timeout + 5, DEFAULT_STALL)),
                query=query,
                stream=True,
            )
        except ApiException as e:
            if int(e.status or 0) == 403:
                if not self.forbidden:
                    log.warning(
                        "NodeFeature %s: watch forbidden (the Role needs verb 'watch' on "
                        "nodefeatures): changes behind the agent's back are found only by "
                        "the periodic re-read",
                        self.name,
                    )
                self.forbidden = True
                return None
            if int(e.status or 0) == 410:
                raise self._gone() from None
            raise

    def _watch_once(self) -> bool:
        """One watch request, its events handed on. True when the server ended it."""
        resp = self._open()
        if resp is None:
            return False
        if self.forbidden:
            self.forbidden = False
            log.info("NodeFeature %s: watch allowed again", self.name)
        from_now = self.resource_version is None
        with self._lock:
            self._resp = resp
            self._stream += 1
            stream = self._stream
            if self._unsure and from_now:  # the object as ADDED first, else a re-read
                self._state_timer = threading.Timer(
                    self.state_wait, self._state_unknown, args=(stream,)
                )
                self._state_timer.daemon = True
                self._state_timer.start()
        self.heard_at = time.monotonic()
        bookmarks: list[float] = []
        try:
            if self._stop.is_set():
                raise WatchStop
            for line in stream_lines(resp, self._stop):
                self.heard_at = time.monotonic()
                if self._event(line, stream):
                    bookmarks = [*bookmarks[-1:], self.heard_at]
                    if len(bookmarks) == 2:
                        gap = bookmarks[1] - bookmarks[0]
                        _set_read_timeout(resp, max(MIN_STALL, STALL_BOOKMARKS * gap))
        except (Expired, Gone):
            raise
        except BaseException:
            self._ran()  # a stream on this version ran (then was cut, stalled, stopped)
            raise
        finally:
            with self._lock:
                self._resp = None
                self._cancel_state_timer()  # an unsure state waits for the next stream
            with contextlib.suppress(Exception):
                resp.close()  # never back to the pool with an unread stream
            with contextlib.suppress(Exception):
                resp.release_conn()
        self._ran()
        return True

    def _ran(self) -> None:
        """A stream on ``resource_version`` ran: the version is the server's own."""
        if self.resource_version is not None:
            self._rv_streamed = True

    def _event(self, line: bytes, stream: int) -> bool:
        """Hand one event on; True for a bookmark."""
        if self._echo(line):
            return False
        try:
            ev = json.loads(line)
            kind = ev["type"]
            obj = ev["object"]
        except (ValueError, KeyError, TypeError):
            raise RuntimeError("unreadable watch event") from None
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            if code == 410:
                raise self._gone()
            raise RuntimeError(f"watch error {code}: {_status_message(obj)}")
        if not isinstance(obj, dict):
            raise RuntimeError("watch event without an object")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if isinstance(rv, str) and rv:
            self.resource_version = rv
            self._rv_streamed = True
        if kind == "BOOKMARK":
            if self._unsure:  # the initial state came and had no object: re-read
                self._state_unknown(stream)
            return True
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            name = (obj.get("metadata") or {}).get("name")
            if name == self.name:
                if self._unsure:  # the restarted watch's initial state: no re-read
                    self._state_known()
                self.on_event(kind, obj)
        return False

    def _echo(self, line: bytes) -> bool:
        """True for the echo of the sink's own write, its object left undecoded.

        - A write's echo carries the whole object: 34 KB with 1,000 rules' labels.
        - Decoding it was ~0.5 ms CPU of each changed pass, for an event the sink ignores.
        - Only the event's type and the object's metadata are decoded here.
        - Any other event is decoded whole, as is any line that does not start as
          :func:`~nfd_gpu.sinks.watchlines.event_head` reads it.
        """
        is_echo = self.is_echo
        head = None if is_echo is None else event_head(line)
        if is_echo is None or head is None:
            return False
        rv, name = head[1].get("resourceVersion"), head[1].get("name")
        if not (isinstance(rv, str) and rv and name == self.name and is_echo(rv)):
            return False
        self.resource_version = rv
        self._rv_streamed = True
        if self._unsure:  # the restarted watch's initial state: no re-read
            self._state_known()
        return True


def _socket(resp: Any) -> socket.socket | None:
    """The socket under a urllib3 response; None where it cannot be found."""
    with contextlib.suppress(Exception):
        fp = getattr(resp, "_fp", None)
        raw = getattr(getattr(fp, "fp", None), "raw", None)
        sock = getattr(raw, "_sock", None)
        if isinstance(sock, socket.socket):
            return sock
    return None


def _set_read_timeout(resp: Any, seconds: float) -> None:
    """Each later read of the stream waits at most ``seconds``, then times out."""
    sock = _socket(resp)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.settimeout(seconds)


def _shutdown(resp: Any) -> None:
    """End a blocked read of ``resp`` at once: its socket is shut down."""
    sock = _socket(resp)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        resp.close()


def _status_message(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("message") or obj.get("reason") or "")
    return ""


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:300]


def describe_drift(current: Obj | None, want: Obj, node_label: str) -> str:
    """What differs between the object on the server and the one the agent wrote, in one line.

    It names ``deleted``, the node-name label, labels added, changed or removed, features,
    owner references.
    """
    if current is None:
        return "deleted"
    parts: list[str] = []
    meta = current.get("metadata") or {}
    have_node = (meta.get("labels") or {}).get(node_label)
    want_node = want["metadata"]["labels"][node_label]
    if have_node != want_node:
        parts.append(f"label {node_label}={have_node!r} (want {want_node!r})")
    raw_spec = current.get("spec")
    spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
    raw_labels = spec.get("labels")
    have: Obj = raw_labels if isinstance(raw_labels, dict) else {}
    wanted: dict[str, str] = want["spec"]["labels"]
    diffs = [f"+{k}={have[k]}" for k in sorted(set(have) - set(wanted))]
    diffs += [
        f"{k}={have[k]} (want {v})" for k, v in sorted(wanted.items()) if k in have and have[k] != v
    ]
    diffs += [f"-{k}" for k in sorted(set(wanted) - set(have))]
    if diffs:
        more = f" and {len(diffs) - 5} more" if len(diffs) > 5 else ""
        parts.append("spec.labels " + ", ".join(diffs[:5]) + more)
    if spec.get("features") != want["spec"]["features"]:
        parts.append("spec.features differ")
    if set(spec) - {"labels", "features"}:
        parts.append("spec has " + ", ".join(sorted(set(spec) - {"labels", "features"})))
    return "; ".join(parts) or "ownerReferences differ"
