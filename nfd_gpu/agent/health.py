"""The agent's GPU health across passes: the hysteresis tracker and the XID watcher.

Each pass hands the XIDs the watcher read since the last one to the tracker
(:meth:`AgentHealth.tracker`, passed to ``run_scan``), which holds them as faults of their
GPU until the agent restarts (docs/health.md "Clearing"). The
watcher starts after the first pass that found NVIDIA GPUs (never with ``--nvml off`` or
``--oneshot``) and never holds the agent's exit up (a daemon thread in an NVML wait).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from nfd_gpu.config import Config, health_options
from nfd_gpu.discovery.nvidia.events import XidWatcher, library
from nfd_gpu.health import HealthTracker
from nfd_gpu.scan import ScanResult
from nfd_gpu.summary import reason_name

log = logging.getLogger("nfd_gpu.agent")


class AgentHealth:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.tracker = HealthTracker(health_options(cfg))
        self.watcher: XidWatcher | None = None
        self._tried = False

    def reload(self, cfg: Config) -> None:
        """New thresholds; the held states and XIDs stay."""
        self.cfg = cfg
        self.tracker.opts = health_options(cfg)

    def before_scan(self) -> None:
        """The XIDs read since the last pass become faults of their GPUs."""
        if self.watcher is not None:
            for address, xid in self.watcher.drain():
                self.tracker.add_xid(address, xid)

    def after_scan(self, result: ScanResult) -> None:
        """Start watching once NVIDIA GPUs were found (and NVML may be asked)."""
        if self._tried or self.cfg.nvml == "off" or self.cfg.oneshot:
            return
        if not result.gpu_count_by_vendor.get("nvidia"):
            return
        self._tried = True
        lib = library(self.cfg.root)
        if lib is None:
            log.info("XID watcher: no NVML here; XIDs are not watched")
            return
        watcher = XidWatcher(lib)
        if not watcher.start():
            log.info("XID watcher: %s; XIDs are not watched", watcher.error)
            return
        self.watcher = watcher
        self.tracker.watching = True
        log.info("XID watcher: watching NVML critical XID events")

    def observe(self, metrics: Any, result: ScanResult) -> None:
        """The pass's health metrics: each GPU's state and reasons, the XIDs by code."""
        gpus = {
            g.address: (g.health.state, {(reason_name(r), r.source) for r in g.health.reasons})
            for g in result.snapshot.gpus
        }
        xids = Counter(self.watcher.counts) if self.watcher is not None else Counter()
        metrics.health.observe(gpus, xids)

    def stop(self) -> None:
        """The watcher ends after its current wait, or with the process (a daemon thread)."""
        if self.watcher is not None and not self.watcher.stop():
            log.debug("XID watcher: in an NVML event wait; it ends with the process")
