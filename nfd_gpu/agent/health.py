"""The agent's GPU health across passes: the hysteresis tracker and the XID watcher.

Each pass hands the XIDs the watcher read since the last one to the tracker
(:meth:`AgentHealth.tracker`, passed to ``run_scan``), which holds them as faults of their
GPU until the agent restarts (docs/health.md "Clearing"). The watcher follows NVML: it
starts after any pass where NVML answered for NVIDIA GPUs (a pod started before the
driver watches once the driver is up), stops when NVML goes (``nvml: off`` on a reload,
the driver unloaded, its event set broken) and starts again when it is back; never with
``--oneshot``; it never holds the agent's exit up (a daemon thread in an NVML wait).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from nfd_gpu.config.loader import Config, health_options
from nfd_gpu.discovery.nvidia.events import XidWatcher, library
from nfd_gpu.health import HealthTracker
from nfd_gpu.health.signals import xid_key
from nfd_gpu.scan import ScanResult
from nfd_gpu.summary import reason_name

log = logging.getLogger("nfd_gpu.agent")
USABLE = ("nvml", "replay")  # NvmlSession.status when NVML answered this pass


class AgentHealth:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.tracker = HealthTracker(health_options(cfg))
        self.watcher: XidWatcher | None = None
        self._said: str | None = None  # the last reason logged why it could not start
        self._past: Counter[int] = Counter()  # XIDs counted by watchers that ended

    def reload(self, cfg: Config) -> None:
        """New thresholds; the held states and XIDs stay."""
        self.cfg = cfg
        self.tracker.opts = health_options(cfg)

    def before_scan(self) -> None:
        """The XIDs read since the last pass become faults of their GPUs."""
        if self.watcher is not None:
            for address, xid in self.watcher.drain():
                self.tracker.add_xid(address, xid)

    def after_scan(self, result: ScanResult, nvml_status: str) -> None:
        """Watch while NVML answers for NVIDIA GPUs (``nvml_status``: the pass's session
        status, ``nvml`` or ``replay`` when it answered); stop when it does not."""
        usable = nvml_status in USABLE and bool(result.gpu_count_by_vendor.get("nvidia"))
        if self.cfg.nvml == "off" or self.cfg.oneshot or not usable:
            if self.watcher is not None:
                log.info("XID watcher: stopped (NVML %s)", nvml_status)
            self._stop_watcher()
            return
        if self.watcher is not None and self.watcher.running():
            return
        if self.watcher is not None:
            log.info("XID watcher: its event set ended (%s); watching again", self.watcher.error)
            self._stop_watcher()
        self._start()

    def _start(self) -> None:
        lib = library(self.cfg.root)
        if lib is None:
            self._say("no NVML here; XIDs are not watched")
            return
        watcher = XidWatcher(lib)
        if not watcher.start():
            self._say(f"{watcher.error}; XIDs are not watched")
            return
        self.watcher = watcher
        self.tracker.watching = True
        self._said = None
        log.info("XID watcher: watching NVML critical XID events")

    def _say(self, why: str) -> None:
        """One log line per reason the watcher could not start (it is tried every pass)."""
        if why != self._said:
            self._said = why
            log.info("XID watcher: %s", why)

    def _stop_watcher(self) -> None:
        if self.watcher is not None:
            self.before_scan()  # the events it read are kept
            self.watcher.stop(timeout=0)
            self._past.update(self.watcher.counts)
            self.watcher = None
        self.tracker.watching = False

    def observe(self, metrics: Any, result: ScanResult) -> None:
        """The pass's health metrics: each GPU's state and reasons, the XIDs by code."""
        gpus = {
            g.address: (g.health.state, {(reason_name(r), r.source) for r in g.health.reasons})
            for g in result.snapshot.gpus
        }
        seen = self._past + (self.watcher.counts if self.watcher is not None else Counter())
        xids: Counter[str] = Counter()
        for code, n in seen.items():  # known codes one series each, the rest one: bounded
            xids[xid_key(code)] += n
        metrics.health.observe(gpus, xids)

    def stop(self) -> None:
        """The watcher ends after its current wait, or with the process (a daemon thread)."""
        if self.watcher is not None and not self.watcher.stop():
            log.debug("XID watcher: in an NVML event wait; it ends with the process")
