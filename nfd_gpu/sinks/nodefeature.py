"""NodeFeature sink: one ``nfd.k8s-sigs.io/v1alpha1`` NodeFeature object per node.

It is the object's state machine: what it should hold, create then patch, its owner
references, the server's version and drift. Its requests go through ``kubeclient.py``.

Write strategy: **create, then a JSON merge patch with ``resourceVersion``**, not
server-side apply. Reasons:

* Steady state costs nothing: the sink remembers the object it last wrote, its spec and
  ``resourceVersion``, and sends no request while the desired spec is unchanged. SSA
  would still need the same local change detection to avoid one PATCH per pass.
* The patch (``nodefeature_patch.py``) is what differs from the server's object at that
  version: a removed key is null, so stale features disappear. The version in it makes
  the server refuse (409) a patch of an object changed since. The result is exactly the
  wanted object, which the answer confirms. SSA with ``force`` silently overwrites a
  concurrent writer; SSA without ``force`` fails the pass.
* A changed pass sends only the change: a few labels of hundreds, not a 36 KB PUT for
  1,000 rules. That was ~0.3-0.5 ms less CPU a changed pass (``benchmarks/agent.py``).
* RBAC is ``get``, ``create``, ``patch``, ``update`` and ``watch`` on ``nodefeatures``;
  ``pods: get`` only for the DaemonSet owner reference. Without ``patch`` (a Role of an
  older release) the sink says so once and replaces the object with a PUT.
* The object is the agent's alone, ``nfd-gpu-<node>``, so conflicts are rare and a
  bounded, jittered re-GET + retry resolves them.

Requests per node: one GET, + one create, at start; zero on unchanged passes; one PATCH per
change; one watch request per resync period, default 1 h, ``nodefeature_watch.py``. The
watch on the object by name reports within a second an object deleted, edited or
relabelled behind the agent's back. The sink then holds the server's version and calls
``on_drift``: the agent runs a pass at once. The next publish restores the object, a
repair: ``take_repair()`` says what differed. Without the ``watch`` verb the sink falls
back to one GET per resync period, jittered +/-10 %. The sink never deletes the object.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from nfd_gpu.features import owned
from nfd_gpu.labels.registry import label_namespaces
from nfd_gpu.names import is_dns1123_subdomain
from nfd_gpu.sinks import Output, OutputSettings, Publication, Sink, SinkError
from nfd_gpu.sinks.dryrun import DryRunSink
from nfd_gpu.sinks.kubeclient import (
    GROUP,
    MAX_OBJECT_BYTES,
    NODE_NAME_LABEL,
    NODE_NAME_MAX,
    PLURAL,
    VERSION,
    ApiStatus,
    Forbidden,
    ObjectClient,
    TooLarge,
    build_api_client,
    is_object,
    namespace_fallback,
    object_name,
)
from nfd_gpu.sinks.nodefeature_patch import merge_patch, replacement
from nfd_gpu.sinks.nodefeature_size import LabelMeasure, json_size, size_note
from nfd_gpu.sinks.nodefeature_stale import remove_stale
from nfd_gpu.sinks.nodefeature_watch import OwnObjectWatch, describe_drift
from nfd_gpu.sinks.owners import owner_key, owner_references

# the transport's names the sink's users need (GROUP ..., the client) come from here too
__all__ = [
    "GROUP",
    "NODE_NAME_LABEL",
    "OUTPUT",
    "PLURAL",
    "VERSION",
    "NodeFeatureSink",
    "build_api_client",
    "hostname_node_name",
]

log = logging.getLogger(__name__)

DRY_RUN_NAMESPACE = "nfd-gpu"  # the namespace deploy/ installs into
# the agent's held health (``Publication.state``, agent/heldstate.py): an annotation of the
# object, read back at start; absent while nothing is held
STATE_ANNOTATION = "gpu.feature.node.kubernetes.io/held-health"

Obj = dict[str, Any]
DONE = {"create": "created", "patch": "patched", "update": "updated"}  # a write's log line


def _policy_prefixes() -> tuple[str, ...]:
    """``<namespace>/`` of each namespace the shipped admission policy lets the agent publish.

    These are the ones the profiles write; a key it allows starts with one.
    """
    return tuple(ns + "/" for ns in label_namespaces())


class NodeFeatureSink(Sink):
    """Publish ``spec.features`` + ``spec.labels`` to ``<namespace>/nfd-gpu-<node>``."""

    name = "nodefeature"

    def __init__(
        self,
        *,
        node_name: str,
        namespace: str,
        api_client: Any = None,
        kubeconfig: str | None = None,
        owner_refs: Sequence[str] = ("pod", "ds"),
        pod_name: str | None = None,
        pod_uid: str | None = None,
        timeout: float = 10.0,
        resync_interval: float = 3600.0,
        max_conflict_retries: int = 2,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
        rng: random.Random | None = None,
        watch: bool = True,
    ) -> None:
        self.node_name = node_name
        self.namespace = namespace
        self.object_name = object_name(node_name)
        self.owner_ref_kinds = tuple(owner_refs)
        self.pod_name = pod_name
        self.pod_uid = pod_uid
        self.resync_interval = resync_interval
        self.max_conflict_retries = max_conflict_retries
        self.clock = clock
        self.api = ObjectClient(
            namespace=namespace,
            name=self.object_name,
            api_client=api_client,
            kubeconfig=kubeconfig,
            timeout=timeout,
        )
        # waits end early on abort (SIGTERM)
        self.sleep: Callable[[float], object] = sleep or (lambda s: self.api.aborted.wait(s))
        self.rng = rng or random.Random()
        self._obj: Obj | None = None  # last object seen from / written to the server
        self._known = False  # _obj reflects the server (None + known = absent)
        self._next_resync = 0.0
        self._too_large: tuple[Obj, SinkError] | None = None  # (spec, the server's refusal)
        self._outside: list[str] = []  # labels the admission policy refuses, said once
        self._checked: Obj | None = None  # the last object _check_size passed
        self._labels = LabelMeasure()  # of the objects _check_size saw
        self._owner_refs: list[Obj] | None = None
        # the watch on the own object, and the state it shares with publish()
        self.watch_enabled = watch
        self._watch: OwnObjectWatch | None = None
        self._lock = threading.Lock()
        self._want: Obj | None = None  # the object the last publish asked for
        self._held: Obj | None = None  # what the server was last confirmed to hold
        self._drift: str | None = None  # what differed, until the next write restores it
        self._drifts = 0  # drift reports so far: one during a publish outlives its confirm
        self._repaired: str | None = None  # the last repair, for take_repair()
        self._own_rvs: list[str] = []  # resourceVersions of the last writes (their echoes)
        self._written = threading.Condition(self._lock)  # a write's request ended
        self._writes = 0  # write requests started
        self._in_flight = False  # a write request is out
        self._basis_rv: str | None = None  # the version the last write was made against
        self._patching = True  # until the Role refuses verb patch

    def abort(self) -> None:
        """Stop now, on SIGTERM: cut in-flight requests; later calls fail at once."""
        self.api.abort()
        if self._watch is not None:
            self._watch.stop()

    # -- owner references ---------------------------------------------------------------

    def _resolve_owner_refs(self) -> list[Obj]:
        if self._owner_refs is None:
            self._owner_refs = owner_references(
                self.api, self.owner_ref_kinds, self.pod_name, self.pod_uid
            )
        return self._owner_refs

    # -- publish --------------------------------------------------------------------------

    def desired(self, pub: Publication) -> Obj:
        meta: Obj = {
            "name": self.object_name,
            "namespace": self.namespace,
            "labels": {NODE_NAME_LABEL: self.node_name},
        }
        if pub.state:
            meta["annotations"] = {STATE_ANNOTATION: pub.state}
        meta["ownerReferences"] = self._resolve_owner_refs()
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NodeFeature",
            "metadata": meta,
            "spec": {
                # only gpu.*: nfd-master appends every NodeFeature's instances, so NFD's
                # own pci.device / kernel.loadedmodule would be counted twice
                "features": owned(pub.features),
                "labels": dict(pub.labels),
            },
        }

    @staticmethod
    def _matches(current: Obj, want: Obj) -> bool:
        return _same_but_state(current, want) and _state(current) == _state(want)

    def where(self) -> str:
        return f"NodeFeature {self.namespace}/{self.object_name}"

    def read_state(self) -> str | None:
        """The held health annotation of the object on the server; None: no object, or none."""
        self._read_server()  # one GET, which the first publish then needs not repeat
        with self._lock:
            return _state(self._obj) if self._obj is not None else None

    def _schedule_resync(self) -> None:
        self._next_resync = self.clock() + self.resync_interval * self.rng.uniform(0.9, 1.1)

    def _watching(self) -> bool:
        """Whether the watch runs, is allowed and was heard from within a resync interval."""
        w = self._watch
        return (  # else the resync GET is due, as a safety net
            w is not None and w.running and not w.forbidden and w.quiet_for() < self.resync_interval
        )

    def _read_server(self) -> None:
        """GET the object into ``_obj``; a difference from what was confirmed is drift."""
        obj = self.api.get()
        with self._lock:
            self._note(obj)
            self._obj = obj
            self._known = True
        self._schedule_resync()

    def _note(self, obj: Obj | None) -> None:
        """Record drift when ``obj``, the server's, is not what it was confirmed to hold last."""
        held, want = self._held, self._want  # the caller holds the lock
        if held is None:
            return
        if obj is not None and any(self._matches(obj, w) for w in (held, want) if w):
            return  # a new scan's labels are not drift
        what = describe_drift(obj, held, NODE_NAME_LABEL)
        if obj is not None and _state(obj) != _state(held):
            note = f"annotation {STATE_ANNOTATION} differs"
            what = note if _same_but_state(obj, held) else f"{what}; {note}"
        self._drift = what
        self._drifts += 1

    def on_watch_event(self, kind: str, obj: Obj | None) -> None:
        """From the watch thread: the server's version of the object changed."""
        with self._lock:
            # the watch lost its history (410) and its restart from "now" did not show
            # the object (absent, or no initial state): read it once
            if kind == "EXPIRED":
                self._known = False
                wake = True
            else:
                rv = (obj or {}).get("metadata", {}).get("resourceVersion")
                if kind != "DELETED" and self._known_version(rv):
                    return  # the echo of the agent's own write, or a version it wrote on
                current = None if kind == "DELETED" else obj
                before = self._drift
                self._note(current)
                self._obj = current
                self._known = True
                wake = self._drift is not None and self._drift != before
        callback = self.on_drift
        if wake and callback is not None:
            callback()

    def _own_write(self, rv: str) -> bool:
        """From the watch thread: whether ``rv`` is known, the event left undecoded.

        - Known: one of the agent's own writes, or the version the last write was made
          against (a re-read's, after a 409). The sink holds it already or has superseded it.
        - An echo may come before its write's answer: it waits for that write's end,
          at most the request's deadline.
        - Then an echo is known: ~0.5 ms less CPU a changed pass.
        - It never waits for a later write.
        """
        with self._lock:
            write, end = self._writes, time.monotonic() + self.api.timeout
            while self._in_flight and self._writes == write and not self._known_version(rv):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._written.wait(left)
            return self._known_version(rv)

    def _known_version(self, rv: Any) -> bool:
        """``rv`` is an own write's or the last write's basis (the caller holds the lock)."""
        return rv in self._own_rvs or (rv is not None and rv == self._basis_rv)

    def degraded(self) -> str | None:
        w = self._watch
        if w is None or not w.forbidden:
            return None
        return (
            "watch forbidden (the Role needs verb 'watch' on nodefeatures): a change behind "
            f"the agent's back is found only by the re-read every {self.resync_interval:g} s"
        )

    def take_repair(self) -> str | None:
        """What the last write restored, once: drift found by the watch or a re-read."""
        with self._lock:
            repaired, self._repaired = self._repaired, None
        return repaired

    def _start_watch(self) -> None:
        if not self.watch_enabled or self._watch is not None or self.api.aborted.is_set():
            return
        self._watch = OwnObjectWatch(
            api_client=self.api.watch_client(),
            group=GROUP,
            version=VERSION,
            namespace=self.namespace,
            plural=PLURAL,
            name=self.object_name,
            on_event=self.on_watch_event,
            is_echo=self._own_write,
            duration=self.resync_interval,
            timeout=self.api.timeout,
            rng=self.rng,
        )
        with self._lock:
            rv = (self._obj or {}).get("metadata", {}).get("resourceVersion")
        self._watch.start(rv)

    def _basis(self) -> tuple[Obj | None, int, str | None]:
        """The object a write decision rests on, with the drift reports seen so far."""
        with self._lock:
            return self._obj, self._drifts, self._drift

    def _confirm(self, obj: Obj | None, basis: tuple[Obj | None, int, str | None]) -> None:
        """Note that the server holds ``_want``: the drift seen at ``basis`` is repaired.

        - ``obj`` is the write's answer, None when nothing was written.
        - Drift the watch reported since stays, with the watch's object, for the pass it woke.
        """
        _, seen, drift = basis
        with self._lock:
            fresh = self._drifts == seen
            if obj is not None and drift is not None:
                self._repaired = drift
            if fresh:
                self._obj = obj if obj is not None else self._obj
                self._drift = None
            self._held = self._want
            self._note_own(obj)
        self._start_watch()

    def publish(self, pub: Publication) -> bool:
        want = self.desired(pub)
        self._check_size(want)
        with self._lock:
            self._want = want
            known = self._known
        if not known or (not self._watching() and self.clock() >= self._next_resync):
            self._read_server()
        basis = self._basis()
        current = basis[0]
        if current is not None and self._matches(current, want):
            self._confirm(None, basis)
            return False
        try:
            answer, basis = self._write(want)
        except TooLarge as e:  # the server's refusal, with what fills the object
            refusal = TooLarge(f"{e} (the object: {size_note(want)})")
            self._too_large = (want["spec"], refusal)
            raise refusal from e
        self._confirm(answer, basis)
        return answer is not None

    def _check_size(self, want: Obj) -> None:
        """Refuse before any request an object too large: over ``MAX_OBJECT_BYTES``, or refused."""
        refused = self._too_large
        if refused is not None and refused[0] == want["spec"]:  # the server refused it
            raise refused[1]  # the same spec is not sent again
        if want == self._checked:  # an unchanged pass: checked and said already
            return
        labels_size, outside = self._labels.update(want["spec"]["labels"], _policy_prefixes())
        if outside and outside != self._outside:
            log.warning(
                "NodeFeature %s/%s: %d labels outside the namespaces the shipped admission "
                "policy allows (%s), which refuses the whole object: %s",
                self.namespace, self.object_name, len(outside), ", ".join(label_namespaces()),
                ", ".join(outside[:5]) + (" ..." if len(outside) > 5 else ""),
            )  # fmt: skip
        self._outside = outside
        # the labels' compact JSON in place of ``{}`` adds its length less 2
        size = json_size({**want, "spec": {**want["spec"], "labels": {}}}) + labels_size - 2
        if size > MAX_OBJECT_BYTES:
            raise TooLarge(
                f"NodeFeature {self.namespace}/{self.object_name} would be "
                f"{size_note(want)}, over {MAX_OBJECT_BYTES}: not sent"
            )
        self._checked = want

    def _write(self, want: Obj) -> tuple[Obj | None, tuple[Obj | None, int, str | None]]:
        """Create or patch (or replace) until the server holds ``want``.

        Returns its answer and the basis of the last attempt.
        """
        for attempt in range(self.max_conflict_retries + 1):
            if attempt:
                # jittered back-off before re-reading after a conflict
                self.sleep(self.rng.uniform(0.05, 0.2) * 2 ** min(attempt - 1, 4))
                obj = self.api.get()
                with self._lock:
                    self._obj = obj
                if obj is not None and self._matches(obj, want):
                    return None, self._basis()  # a re-read found it there already
            basis = self._basis()
            current = basis[0]
            try:
                verb, answer = self._sending(current, want)
            except ApiStatus as s:
                log.info("NodeFeature %s/%s: %s (%s), retrying",
                         self.namespace, self.object_name, s.status, s.reason)  # fmt: skip
                if s.status == 404:
                    with self._lock:
                        self._obj = None  # deleted behind our back: re-GET then create
                continue
            # Success is what the server confirmed: the object it answered with, carrying
            # a resourceVersion and exactly the spec sent. Anything else (a cut-off or
            # empty answer) is a failure, and the next pass re-reads the object.
            if not is_object(answer) or answer.get("spec") != want["spec"]:
                with self._lock:
                    self._obj = None
                    self._known = False
                raise SinkError(
                    f"{verb} NodeFeature {self.namespace}/{self.object_name}: the server did "
                    "not confirm the write (no or incomplete object in the answer)",
                    transient=True,
                )
            log.info("%s NodeFeature %s/%s", DONE[verb], self.namespace, self.object_name)
            return dict(answer), basis
        with self._lock:
            self._known = False
        raise SinkError(
            f"NodeFeature {self.namespace}/{self.object_name}: gave up after "
            f"{self.max_conflict_retries + 1} conflicting writes",
            transient=True,
        )

    def _sending(self, current: Obj | None, want: Obj) -> tuple[str, Any]:
        """:meth:`_send`, known to the watch while it is out; its answer's version noted."""
        meta = (current or {}).get("metadata") or {}
        with self._lock:
            self._writes += 1
            self._in_flight = True
            self._basis_rv = meta.get("resourceVersion") if current is not None else None
        answer = None
        try:
            verb, answer = self._send(current, want)
        finally:
            with self._lock:
                self._in_flight = False
                self._note_own(answer)
                self._written.notify_all()
        return verb, answer

    def _note_own(self, answer: Any) -> None:
        """Keep the version of an answer, for its echo (the caller holds the lock)."""
        meta = answer.get("metadata") if isinstance(answer, dict) else None
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if isinstance(rv, str) and rv and rv not in self._own_rvs:
            self._own_rvs = [*self._own_rvs[-7:], rv]

    def _send(self, current: Obj | None, want: Obj) -> tuple[str, Any]:
        """One write of ``want``: the verb and the answer.

        - Absent: a create.
        - Else a merge patch of what differs from ``current``, with its version.
        - Without the Role's ``patch`` verb, or when no patch says it, a replace (PUT).
        """
        if current is None:
            return "create", self.api.create(want)
        patch = None
        if self._patching:
            patch = merge_patch(current, want, NODE_NAME_LABEL, STATE_ANNOTATION)
        if patch is not None:
            try:
                return "patch", self.api.patch(patch)
            except Forbidden as refused:  # a Role of an older release: get, create, update
                # a PUT refused too raises: the Role refuses writes, patching stays on
                answer = self.api.replace(replacement(current, want, STATE_ANNOTATION))
                self._patching = False
                log.warning("NodeFeature %s/%s: %s; writing with 'update' (PUT) from now on",
                            self.namespace, self.object_name, refused)  # fmt: skip
                return "update", answer
        return "update", self.api.replace(replacement(current, want, STATE_ANNOTATION))

    def close(self) -> None:
        """Stop the watch; never delete the object: labels must not flap on a restart or rollout."""
        if self._watch is not None:
            self._watch.stop(join=1.0)

    def detach(self) -> None:
        self.close()  # the watch; the object stays


def _same_but_state(current: Obj, want: Obj) -> bool:
    """Whether ``current`` holds ``want``'s spec, node-name label and owners, held health aside."""
    meta = current.get("metadata") or {}
    return (
        current.get("spec") == want["spec"]
        and (meta.get("labels") or {}).get(NODE_NAME_LABEL)
        == want["metadata"]["labels"][NODE_NAME_LABEL]
        and owner_key(meta.get("ownerReferences") or [])
        == owner_key(want["metadata"]["ownerReferences"])
    )


def _state(obj: Obj) -> str | None:
    """The object's held health annotation; None: none, or not a string."""
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    value = notes.get(STATE_ANNOTATION) if isinstance(notes, dict) else None
    return value if isinstance(value, str) else None


def _build(cfg: OutputSettings) -> NodeFeatureSink:
    assert cfg.node_name and cfg.namespace  # checked by config validation
    return NodeFeatureSink(
        node_name=cfg.node_name,
        namespace=cfg.namespace,
        api_client=build_api_client(cfg.kubeconfig),
        owner_refs=cfg.owner_refs,
        pod_name=cfg.pod_name,
        pod_uid=cfg.pod_uid,
        timeout=cfg.api_timeout,
        resync_interval=cfg.resync_interval,
    )


def _dry_run(cfg: OutputSettings, stream: TextIO | None) -> DryRunSink:
    """The object as YAML, built with no API client; ``ownerReferences`` are left empty."""
    from nfd_gpu.yamllib import yaml  # lazy: only a dry run prints YAML

    assert cfg.node_name and cfg.namespace  # config fills them for a dry run
    sink = NodeFeatureSink(node_name=cfg.node_name, namespace=cfg.namespace, owner_refs=())

    def render(pub: Publication) -> str:
        return "---\n" + yaml.safe_dump(sink.desired(pub), sort_keys=False)

    return DryRunSink(OUTPUT.name, render, stream)


def hostname_node_name() -> str | None:
    """The kubelet's default node name, the host name lower-cased; None if not a valid name part."""
    name = socket.gethostname().strip().lower()  # ``--hostname-override`` aside
    ok = is_dns1123_subdomain(name)
    return name if ok and len(name) <= NODE_NAME_MAX else None


def _fill(values: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's namespace when none is given; for a dry run, the node named after this host."""
    namespace = values.get("namespace") or namespace_fallback()
    filled = {"namespace": namespace} if namespace else {}
    if values.get("dry_run"):  # it needs no cluster; the name is the kubelet's default
        filled["node_name"] = values.get("node_name") or hostname_node_name()
        filled["namespace"] = namespace or DRY_RUN_NAMESPACE
    return filled


def _check(cfg: OutputSettings) -> str | None:
    if not cfg.node_name:
        return "the nodefeature output needs a node name (NODE_NAME or --node-name)"
    if not cfg.namespace:
        return "the nodefeature output needs a namespace (POD_NAMESPACE or --namespace)"
    return None


OUTPUT = Output(
    "nodefeature",
    settings=(
        "node_name",
        "namespace",
        "pod_name",
        "pod_uid",
        "owner_refs",
        "kubeconfig",
        "api_timeout",
        "resync_interval",
    ),
    build=_build,
    dry_run=_dry_run,
    check=_check,
    describe=lambda cfg: f"nodefeature={cfg.namespace}/{object_name(cfg.node_name)}",
    repairs=True,
    fill=_fill,
    retire=remove_stale,
)
