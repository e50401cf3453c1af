"""The agent's GPU health across passes: the hysteresis tracker and the XID watcher.

Each pass:

- the tracker gets the XIDs the watcher read since the last pass;
  :meth:`AgentHealth.tracker` is passed to ``run_scan``;
- it holds them as faults of their GPU until the GPU is re-initialised or the node reboots;
- this holds across restarts of the agent: :meth:`AgentHealth.restore` at start,
  :meth:`AgentHealth.state` each pass, ``heldstate.py``, docs/health.md "Across restarts".

The watcher follows NVML:

- it starts after any pass where NVML answered for NVIDIA GPUs, so a pod started before the
  driver watches once the driver is up;
- it stops when NVML goes: ``nvml: off`` on a reload, the driver unloaded, its event set broken;
- it starts again when NVML is back;
- never with ``--oneshot``;
- it never holds the agent's exit up: it is a daemon thread in an NVML wait.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from nfd_gpu.agent.heldstate import HeldGpu, HeldState, boot_id, decode, encode, instance, on_bus
from nfd_gpu.config.loader import Config, health_options
from nfd_gpu.discovery.nvidia.events import XidWatcher, library
from nfd_gpu.health import HealthTracker
from nfd_gpu.health.signals import xid_key
from nfd_gpu.host import HostRoot
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
        self.restored = False  # what an earlier run published was read back (or none was)
        self._boot_id: str | None = None
        self._instances: dict[str, str] = {}  # a GPU held failed -> its instance() then

    def restore(self, text: str | None, where: str) -> None:
        """At start, carry forward what an earlier run of the agent held.

        - ``text`` is the published state read from ``where``; None: nothing published.
        - Nothing is carried when the node rebooted since.
        - Nothing is carried for a GPU re-initialised or gone; see heldstate.py.
        """
        self.restored = True
        host = HostRoot(self.cfg.root)
        try:
            self._boot_id = boot_id(host)
            if text:
                self._carry(text, where, host)
        finally:
            host.close()

    def _carry(self, text: str, where: str, host: HostRoot) -> None:
        try:
            state = decode(text, self.cfg.node_name or "")
        except ValueError as e:  # malformed, or another node's / writer's
            log.warning("%s: held health ignored: %s", where, e)
            return
        if self._boot_id is None:
            log.warning(
                "%s: held health not carried: no boot id here (/%s) to tell a reboot",
                where, "proc/sys/kernel/random/boot_id",
            )  # fmt: skip
            return
        if state.boot_id != self._boot_id:
            log.info(
                "%s: held health of %d GPU(s) cleared: the node rebooted", where, len(state.gpus)
            )
            return
        self.tracker.carry_boot(state.boot)
        for address, held in sorted(state.gpus.items()):
            self._carry_gpu(address, held, instance(host, address))

    def _carry_gpu(self, address: str, held: HeldGpu, now: str) -> None:
        if not on_bus(now):  # not made up again; one of the boot set is lost
            log.info("held health of GPU %s not carried: it is not on the bus", address)
            return
        if now != held.instance:
            log.info(
                "held health of GPU %s cleared: re-initialised since (its PCI function "
                "added again or its driver bound again)", address,
            )  # fmt: skip
            return
        # oneshot: one pass, no hysteresis: only what the hardware cannot show again (XIDs)
        reasons = () if self.cfg.oneshot else held.reasons
        if not reasons and not held.xids:
            return
        self.tracker.carry(address, reasons, held.xids)
        self._instances[address] = now
        what = [r.reason for r in reasons] + [f"xid-{x}" for x in held.xids]
        log.warning(
            "GPU %s stays failed (%s): held before the agent restarted", address, ", ".join(what)
        )

    def state(self, lost: tuple[str, ...]) -> str:
        """What to publish for the next run, heldstate.encode's line.

        It is "" while nothing is held, and where no boot id can tell a reboot.
        """
        held = self.tracker.failed()
        for gone in set(self._instances) - set(held):
            del self._instances[gone]
        if self._boot_id is None or (not held and not lost):
            return ""
        host = HostRoot(self.cfg.root)
        try:
            gpus = {}
            for a, (reasons, xids) in held.items():
                if a not in self._instances:  # the GPU as it was when it failed
                    self._instances[a] = instance(host, a)
                gpus[a] = HeldGpu(self._instances[a], reasons, xids)
        finally:
            host.close()
        boot = tuple(sorted(self.tracker.boot))
        return encode(HeldState(self._boot_id, self.cfg.node_name or "", gpus, boot))

    def _reinitialised(self) -> None:
        """Start afresh a GPU held failed that was re-initialised.

        That is, its PCI function was added again or its driver bound again: heldstate.instance
        changed. What was held on it is gone.
        """
        if not self._instances:
            return
        host = HostRoot(self.cfg.root)
        try:
            for address, was in sorted(self._instances.items()):
                now = instance(host, address)
                if on_bus(now) and now != was:
                    log.info("GPU %s re-initialised (PCI function or driver binding new): "
                             "its held faults are cleared", address)  # fmt: skip
                    self.tracker.forget(address)
                    del self._instances[address]
        finally:
            host.close()

    def reload(self, cfg: Config) -> None:
        """New thresholds; the held states and XIDs stay."""
        self.cfg = cfg
        self.tracker.opts = health_options(cfg)

    def before_scan(self) -> None:
        """Make the XIDs read since the last pass faults of their GPUs.

        A GPU re-initialised since sheds what was held on it.
        """
        self._reinitialised()
        self._drain()

    def _drain(self) -> None:
        if self.watcher is not None:
            for address, xid in self.watcher.drain():
                self.tracker.add_xid(address, xid)

    def after_scan(self, result: ScanResult, nvml_status: str) -> None:
        """Watch while NVML answers for NVIDIA GPUs; stop when it does not.

        ``nvml_status`` is the pass's session status; NVML answered when it is ``nvml`` or
        ``replay``.
        """
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
        """Log one line per reason the watcher could not start; it is tried every pass."""
        if why != self._said:
            self._said = why
            log.info("XID watcher: %s", why)

    def _stop_watcher(self) -> None:
        if self.watcher is not None:
            self._drain()  # the events it read are kept
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
        """End the watcher after its current wait, or with the process: it is a daemon thread."""
        if self.watcher is not None and not self.watcher.stop():
            log.debug("XID watcher: in an NVML event wait; it ends with the process")
