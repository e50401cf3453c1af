"""Publishing: one publication handed to every sink, and the change line.

- A failing sink is logged and counted; the others still get the publication.
- Whether the failure may pass by itself, ``transient``, decides the back-off and readiness.
- A transient failure such as an API outage leaves ``/readyz`` 200 and sets
  ``nfd_gpu_publish_failing{sink}``.
- A refusal makes ``/readyz`` 503.
- One log line per publish that changed something.
- One warning per repair, when a sink restored what was changed behind the agent's back.
  ``take_repair()`` tells; ``nfd_gpu_repairs_total{output}`` counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from nfd_gpu.agent.logs import one_line
from nfd_gpu.features import Features
from nfd_gpu.sinks import Publication, Sink, SinkError

log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)


# What one node may carry: every Node watcher (kubelet, scheduler, each controller) gets
# every label in every event of that Node. At most MAX_LABELS labels (more than 10x what the
# profiles and the shipped rules write together) and MAX_LABEL_BYTES of keys and values
# (Kubernetes' own limit on an object's annotations, TotalAnnotationSizeLimitB: 256 KiB).
MAX_LABELS = 1000
MAX_LABEL_BYTES = 256 * 1024


def too_large(labels: dict[str, str], rule_labels: int) -> str | None:
    """Why ``labels`` are too many or too large to publish, or None.

    The reason names who set most of them.
    """
    n = len(labels)
    size = sum(map(len, labels)) + sum(map(len, labels.values()))
    if n <= MAX_LABELS and size <= MAX_LABEL_BYTES:
        return None
    who = (
        f"the rules set {rule_labels} of them"
        if rule_labels * 2 >= n
        else f"the profiles set {n - rule_labels} of them"
    )
    return (
        f"{n} labels, {size} bytes: more than a node may carry (at most {MAX_LABELS} "
        f"labels and {MAX_LABEL_BYTES} bytes; {who}); publishing nothing new"
    )


def label_changes(old: dict[str, str] | None, new: dict[str, str]) -> tuple[int, int, int]:
    """Added, removed and changed label counts from ``old`` to ``new``.

    ``old`` is None when nothing was published.
    """
    if old == new:
        return 0, 0, 0
    old = old or {}
    # only the entries that differ are walked: the symmetric difference of the items, built
    # in C (800 rule labels, 3 changed: ~40 us, a loop over every label ~70 us). A changed
    # label is in it twice, with its new value and its old one: counted by the new one.
    added = removed = changed = 0
    for k, v in new.items() ^ old.items():
        if k not in old:
            added += 1
        elif k not in new:
            removed += 1
        elif new[k] is v:  # its new value, not its old one
            changed += 1
    return added, removed, changed


class Publisher:
    """The sinks, and what the last publish that wrote to any of them held."""

    def __init__(self, sinks: Sequence[Sink], metrics: Any) -> None:
        self.sinks: list[Sink] = list(sinks)
        self.metrics = metrics
        self.transient = False  # the last publish failed in a way that may pass by itself
        self.refused = False  # the last publish failed in a way that will not pass by itself
        # labels and features of the last publish that wrote (for the change log line)
        self._published: dict[str, str] | None = None
        self._published_features: Features | None = None

    def publish(self, pub: Publication, stopping: Callable[[], bool]) -> bool:
        """Hand ``pub`` to every sink in order until ``stopping()``; True when all hold it."""
        ok = True
        written: list[str] = []
        self.transient = False
        self.refused = False
        for sink in self.sinks:
            if stopping():
                ok = False
                break
            try:
                wrote = sink.publish(pub)
            except Exception as e:  # SinkError, or a bug: the loop (and the labels) survive
                ok = False
                transient = isinstance(e, SinkError) and e.transient
                self.transient = self.transient or transient
                self.refused = self.refused or not transient
                if isinstance(e, SinkError):
                    log.error("%s: %s", sink.name, e)
                else:
                    log.error("%s: unexpected %s", sink.name, one_line(e), exc_info=True)
                if self.metrics is not None:
                    self.metrics.observe_publish(sink.name, "error")
                    self.metrics.publish_failed(sink.name, f"{sink.name}: {e}", transient)
                continue
            if self.metrics is not None:
                self.metrics.observe_publish(sink.name, "written" if wrote else "unchanged")
                self.metrics.publish_ok(sink.name)
                self.metrics.set_degraded(sink.name, sink.degraded())
            if wrote:
                written.append(sink.name)
                self._note_repair(sink)
        if written:
            self._log_change(written, pub)
        return ok

    def _note_repair(self, sink: Sink) -> None:
        what = sink.take_repair()
        if what:
            log.warning(
                "%s: restored what was changed behind the agent's back: %s", sink.name, what
            )
            if self.metrics is not None:
                self.metrics.observe_repair(sink.name)

    def _log_change(self, sinks: list[str], pub: Publication) -> None:
        """Log one line per publish that changed something: labels added, removed, changed.

        A feature-file expiry refresh changes nothing and logs only its write.
        """
        added, removed, changed = label_changes(self._published, pub.labels)
        features_changed = pub.features != self._published_features
        if self._published is None or added or removed or changed or features_changed:
            log.info(
                "published %d labels to %s: %d added, %d removed, %d changed%s",
                len(pub.labels),
                ", ".join(sinks),
                added,
                removed,
                changed,
                ", raw features changed" if features_changed and self._published else "",
            )
        # held, not copied: a publication is never changed once built (the agent hands its
        # last good one to the sinks again, loop.py ``_keep_last_good``, on the same terms)
        self._published = pub.labels
        self._published_features = pub.features


class RepairPacer:
    """When a repair pass may run.

    - The first runs at once.
    - While repairs keep coming, another writer fighting the agent, at most one per ``gap``.
    - ``gap`` doubles from 1 s up to the interval.
    - A quiet minute, or 4 gaps, resets it.
    """

    def __init__(self) -> None:
        self._last = float("-inf")
        self._gap = 0.0

    def not_before(self) -> float:
        return self._last + self._gap

    def ran(self, now: float, interval: float) -> None:
        if now - self._last > max(60.0, 4 * self._gap):
            self._gap = 0.0
        else:
            self._gap = min(interval, max(1.0, 2 * self._gap))
        self._last = now
