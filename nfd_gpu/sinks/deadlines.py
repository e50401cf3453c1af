"""Total deadlines of API requests: one thread that runs a callback when its time passes.

- A request's ``urllib3`` timeout bounds each socket operation only, so a server trickling
  one byte at a time could hold it forever. Its deadline cuts its connections.
- A ``threading.Timer`` per request started and ended a thread for each: ~0.2 ms CPU of
  every write, on every node.
- Here one daemon thread serves them all, started on first use (again, should it have
  ended). It sleeps until the earliest entry's time, without end while there is none.
- An entry disarmed before its time is dropped, unrun, when its time comes: one wake-up
  per request, never a poll.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("nfd_gpu.sinks")


class Deadline:
    """One armed callback: :meth:`disarm` before its time and it never runs."""

    __slots__ = ("armed", "at", "fn")

    def __init__(self, at: float, fn: Callable[[], object]) -> None:
        self.at = at
        self.fn = fn
        self.armed = True

    def disarm(self) -> None:
        self.armed = False


class Deadlines:
    """Callbacks run on one thread when their deadline (``time.monotonic``) passes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()  # ties: first armed, first run
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fn: Callable[[], object]) -> Deadline:
        """Run ``fn`` in ``seconds`` unless the returned entry is disarmed first."""
        entry = Deadline(time.monotonic() + seconds, fn)
        with self._cond:
            earliest = not self._heap or entry.at < self._heap[0][0]
            heapq.heappush(self._heap, (entry.at, next(self._order), entry))
            if self._thread is None or not self._thread.is_alive():
                thread = threading.Thread(target=self._run, name="api-deadlines", daemon=True)
                thread.start()  # may raise (no thread can start): the request is not sent
                self._thread = thread
            elif earliest:  # the thread sleeps until a later one, or without end
                self._cond.notify()
        return entry

    def pending(self) -> int:
        """Entries not yet run nor dropped (for tests)."""
        with self._cond:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._heap:
                        self._cond.wait()
                        continue
                    at, _, entry = self._heap[0]
                    if not entry.armed:
                        heapq.heappop(self._heap)
                        continue
                    wait = at - time.monotonic()
                    if wait > 0:
                        self._cond.wait(wait)
                        continue
                    heapq.heappop(self._heap)
                    break
            if entry.armed:  # disarmed while the lock was let go: not run
                try:
                    entry.fn()
                except Exception:  # a callback's failure must not end the thread
                    log.exception("API request deadline: its callback failed")


# the process's deadlines: every API session's requests
DEADLINES = Deadlines()
