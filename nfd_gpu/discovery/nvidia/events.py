"""The XID watcher: NVML's event set on a thread, between the agent's passes.

- ``nvmlEventSetCreate()``, then ``nvmlDeviceRegisterEvents(handle, types, set)`` for
  every GPU.
- The types are critical XID and double-bit ECC events, as far as
  ``nvmlDeviceGetSupportedEventTypes`` allows.
- Then ``nvmlEventSetWait(set, timeout_ms)`` in a loop. It blocks in the driver until an
  event or the timeout, ``NVMLError_Timeout``.
- So an idle watcher wakes once per ``timeout_ms``. benchmarks/xid_watch.py measures what
  that costs.
- Each event is the GPU's PCI address and its XID, from ``eventData``.
- A double-bit ECC event counts as XID 48, which is what the driver logs for it.
- :meth:`XidWatcher.drain` hands the events over to the pass.
- :meth:`XidWatcher.stop` tells the thread to end after its current wait.
- Three failed waits in a row end it too. They are not timeouts: the driver went away.
  :meth:`XidWatcher.running` turns False, and the agent starts a new one when NVML is back.
- The thread is a daemon, so the agent exits at once whatever NVML is doing, within its
  STOP_GRACE.

The library is the NVML the agent asks, by :func:`library`:

- ``<root>/nvml.json`` when the root has a recording. Its ``"events"`` are replayed by
  replay.py.
- Else pynvml.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from types import ModuleType
from typing import Any

from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING
from nfd_gpu.discovery.pciaddr import canonical

EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError
EVENT_DOUBLE_BIT_ECC = 0x2  # nvmlEventTypeDoubleBitEccError
XID_DOUBLE_BIT_ECC = 48  # the XID the driver logs for a double-bit ECC error
# One idle wake-up per 30 s (each costs ~0.1 ms CPU on a busy VM: benchmarks/xid_watch.py).
# An event ends the wait at once, so this is no delay; the thread is a daemon, so a wait in
# progress never holds the agent's exit up (stop() does not wait for it).
WAIT_MS = 30_000
MAX_PENDING = 10_000  # events kept between two passes at most (a storm never grows memory)
MAX_FAILURES = 3  # failed waits in a row that end the watcher (the agent starts a new one)
RETRY_MS = 1_000  # the pause after a failed wait


def library(root: str) -> ModuleType | None:
    """The NVML for events: the recording at ``root``, else pynvml; None when neither."""
    from nfd_gpu.discovery.nvidia import nvml, replay  # lazy: NVML only when watched

    path = os.path.join(root, NVML_RECORDING)
    if os.path.lexists(path):
        try:
            return replay.load(path)
        except (OSError, replay.RecordingError):
            return None
    return nvml.load_library()


class XidWatcher:
    """Critical XID events of every GPU, read on a thread, as the module docstring says."""

    def __init__(self, lib: ModuleType, wait_ms: int = WAIT_MS) -> None:
        self.lib = lib
        self.wait_ms = wait_ms
        self.counts: Counter[int] = Counter()  # XIDs seen since start, by code
        self.error: str | None = None  # why the event set could not be made, if so
        self._pending: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._set: Any = None
        self._inited = False
        self._failures = 0  # failed waits in a row
        self._thread: threading.Thread | None = None

    def open(self) -> bool:
        """``nvmlInit``, the event set, every GPU registered; False when not: ``error`` says why."""
        lib = self.lib
        try:
            lib.nvmlInit()
        except Exception as exc:
            self.error = f"nvmlInit: {exc}"
            return False
        self._inited = True
        try:
            self._set = lib.nvmlEventSetCreate()
            for i in range(int(lib.nvmlDeviceGetCount())):
                self._register(lib.nvmlDeviceGetHandleByIndex(i))
        except lib.NVMLError as exc:
            self.error = f"event set: {exc}"
            self.close()
            return False
        return True

    def _register(self, h: Any) -> None:
        wanted = EVENT_XID | EVENT_DOUBLE_BIT_ECC
        with contextlib.suppress(self.lib.NVMLError):  # not supported: register all wanted
            wanted &= int(self.lib.nvmlDeviceGetSupportedEventTypes(h))
        if wanted:
            with contextlib.suppress(self.lib.NVMLError):  # a GPU without events: skipped
                self.lib.nvmlDeviceRegisterEvents(h, wanted, self._set)

    def poll(self, wait_ms: int) -> bool:
        """One ``nvmlEventSetWait``; True when it delivered an event."""
        lib = self.lib
        try:
            data = lib.nvmlEventSetWait(self._set, wait_ms)
        except lib.NVMLError as exc:
            if type(exc).__name__ == "NVMLError_Timeout":
                self._failures = 0
                return False
            self._failures += 1
            if self._failures >= MAX_FAILURES:  # the set is dead (driver gone): end
                self.error = f"nvmlEventSetWait: {exc}"
                self._stop.set()
            else:
                self._stop.wait(min(wait_ms, RETRY_MS) / 1000)  # GPU lost etc.: no busy loop
            return False
        self._failures = 0
        kind = int(data.eventType)
        xid = XID_DOUBLE_BIT_ECC if kind & EVENT_DOUBLE_BIT_ECC else int(data.eventData)
        try:
            addr = canonical(_str(lib.nvmlDeviceGetPciInfo(data.device).busId))
        except lib.NVMLError:
            return True  # the GPU is gone: NVML's own calls report that
        if addr is None:
            return True  # not a PCI address: no GPU to charge it to
        with self._lock:
            self.counts[xid] += 1
            if len(self._pending) < MAX_PENDING:
                self._pending.append((addr, xid))
        return True

    def drain(self) -> list[tuple[str, int]]:
        """The address and XID events since the last drain."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def start(self) -> bool:
        """Open and watch on a daemon thread; False when NVML has no event set here."""
        if not self.open():
            return False
        self._thread = threading.Thread(target=self._run, name="xid-watch", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll(self.wait_ms)
        finally:
            self.close()

    def running(self) -> bool:
        """True while the thread watches; False once it ended, and ``error`` says why."""
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def stop(self, timeout: float = 0.5) -> bool:
        """Tell the thread to end after its current wait; True when it ended within ``timeout``.

        Else it is still in ``nvmlEventSetWait`` and ends with the process.
        """
        self._stop.set()
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        return not t.is_alive()

    def close(self) -> None:
        """Free the event set and shut this watcher's NVML reference down."""
        if self._set is not None:
            with contextlib.suppress(Exception):
                self.lib.nvmlEventSetFree(self._set)
            self._set = None
        if self._inited:
            self._inited = False
            with contextlib.suppress(Exception):
                self.lib.nvmlShutdown()


def _str(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
