"""The agent loop: scan -> publish, once or forever.

A pass runs:

- on a timer, ``interval``;
- on debounced udev events, ``udev.py``;
- on SIGHUP, which also reloads the configuration; rules are re-read by every scan;
- when a sink reports its published object changed behind the agent's back: ``on_drift``,
  the NodeFeature's watch, paced by :class:`~nfd_gpu.agent.publish.RepairPacer`.

- SIGTERM/SIGINT end the loop at once, unless a write is under way: then once it has
  finished. A scan that is cut off has published nothing.
- A failed publish is retried with jittered exponential back-off, capped at the interval.
- The agent never exits because the API server or the disk misbehaves.
- Readiness and liveness are the metrics server's, ``metrics.py``, fed from here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from nfd_gpu.agent.health import AgentHealth
from nfd_gpu.agent.lastvalid import LastValid, StaleFiles, changes
from nfd_gpu.agent.logs import one_line, setup_logging
from nfd_gpu.agent.metrics import MetricsServer
from nfd_gpu.agent.outputs import build_sinks, sink_settings
from nfd_gpu.agent.publish import Publisher, RepairPacer, too_large
from nfd_gpu.agent.rulefiles import RuleFiles
from nfd_gpu.agent.startup import (
    DEFAULT_RULES_DIR,
    retire_outputs,
    startup_line,
    warn_deprecated,
)
from nfd_gpu.agent.udev import UdevTrigger
from nfd_gpu.config.loader import Config, split_address
from nfd_gpu.config.sharing import nvidia_options
from nfd_gpu.discovery.nvidia.session import NvmlSession
from nfd_gpu.labels.nvidia import NvidiaOptions
from nfd_gpu.record import replace
from nfd_gpu.scan import RuleOutputs, ScanResult, run_scan
from nfd_gpu.sinks import Publication, Sink, SinkError

# SIGTERM/SIGINT: the process ends within this many seconds, whatever it is waiting for.
STOP_GRACE = 4.0


class _Stopped(BaseException):
    """Raised by the SIGTERM/SIGINT handler to cut a pass short while nothing is written.

    A BaseException, as KeyboardInterrupt: the scan's ``except Exception`` does not keep it.
    """


log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)

ScanFn = Callable[..., ScanResult]


def liveness_timeout(cfg: Config) -> float:
    """How long ``/healthz`` stays healthy without a pass: five intervals, at least 300 s."""
    return max(300.0, 5 * cfg.interval)


class Agent:
    """One node's agent: ``run()`` loops scan -> publish until stopped, or once."""

    def __init__(
        self,
        cfg: Config,
        *,
        scan: ScanFn | None = None,
        sinks: Sequence[Sink] | None = None,
        reload: Callable[[], Config] | None = None,
        metrics: Any = None,
        config_file: str | None = None,
    ) -> None:
        self.cfg = cfg
        self._scan: ScanFn = scan or run_scan
        # gfd.timestamp: fixed once per process start (as GFD), so passes stay unchanged.
        self.started = int(time.time())
        self.publisher = Publisher(sinks if sinks is not None else build_sinks(cfg), metrics)
        self._reload_fn = reload
        self._sink_key = sink_settings(cfg)  # what the sinks were built from
        self.metrics = metrics
        self.stop_event = threading.Event()
        self._wake = threading.Event()
        self._reload_requested = threading.Event()
        self._udev_at: float | None = None
        self._udev_lock = threading.Lock()
        self._failures = 0
        self._last_warnings: list[str] = []
        self._rng = random.Random()
        self.metrics_server: Any = None
        self.passes = 0
        self._last_good: Publication | None = None  # what the last complete scan found
        self._stop_at: float | None = None  # monotonic deadline once SIGTERM arrived
        self._done = threading.Event()  # run() has finished (the watchdog stands down)
        self._cuttable = False  # a signal may end the pass now: no write under way
        self._nvml: NvmlSession | None = None  # kept across passes (built on first use)
        self._nvml_state: tuple[str, str | None] = ("none", None)
        self._drift = threading.Event()  # a sink's published object changed: repair it
        self._too_large: str | None = None  # the last result over the size limit, said once
        # last valid configuration wins (lastvalid.py): rules, sharing config, config file
        self.stale = StaleFiles(metrics)
        self._rules = RuleFiles(self.stale)
        self._rule_outputs = RuleOutputs()  # this agent's last rule output (scan.py)
        self._sharing: LastValid[NvidiaOptions] = LastValid(self.stale, "sharing config")
        self.config_file = config_file
        self._pacer = RepairPacer()
        self._attach(self.sinks)
        self.health = AgentHealth(cfg)  # GPU health across passes, the XID watcher
        self._read_back_said: str | None = None  # the last reason the held health was not read

    @property
    def sinks(self) -> list[Sink]:
        return self.publisher.sinks

    # signals / triggers
    def request_stop(self, *_: Any) -> None:
        """Stop: the loop ends after the current pass.

        - In-flight API requests are cut off by ``Sink.abort``.
        - A watchdog ends the process STOP_GRACE seconds later, whatever is still running.
        - Every write is atomic, so nothing is damaged.
        """
        if self._stop_at is None:
            self._stop_at = time.monotonic() + STOP_GRACE
        self.stop_event.set()
        self._wake.set()
        for sink in self.sinks:
            sink.abort()

    def request_reload(self, *_: Any) -> None:
        self._reload_requested.set()
        self._wake.set()

    def drift_event(self) -> None:
        """Note that a sink's published object was changed behind the agent's back; any thread."""
        self._drift.set()
        self._wake.set()

    def _attach(self, sinks: Sequence[Sink]) -> None:
        for sink in sinks:
            sink.on_drift = self.drift_event

    def udev_event(self) -> None:
        with self._udev_lock:
            self._udev_at = time.monotonic()
        self._wake.set()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_stop(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s, stopping after the current pass", signal.Signals(signum).name)
            first = self._stop_at is None
            self.request_stop()
            if first:
                threading.Thread(target=self._watchdog, name="stop-watchdog", daemon=True).start()
            if self._cuttable:  # scanning or waiting: nothing to finish
                self._cuttable = False
                raise _Stopped

        def on_hup(signum: int, _frame: FrameType | None) -> None:
            log.info("received SIGHUP: reloading configuration and rescanning")
            self.request_reload()

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_hup)

    def _watchdog(self) -> None:
        """End the process STOP_GRACE seconds after SIGTERM/SIGINT."""
        if self._done.wait(STOP_GRACE):
            return
        log.error("stop: the current pass did not end within %.0f s, exiting now", STOP_GRACE)
        logging.shutdown()
        os._exit(0)

    # one pass
    def scan(self) -> ScanResult:
        kwargs: dict[str, Any] = {"profiles": self.cfg.profiles}
        if self.cfg.profile_options:
            kwargs["profile_options"] = self.cfg.profile_options
        if "nvidia" in self.cfg.profiles and (
            self.cfg.mig_strategy is not None or self.cfg.sharing_config or self.cfg.gfd_timestamp
        ):
            kwargs["nvidia_options"] = self._nvidia_options()
        kwargs["nvml"] = self._nvml_session()
        kwargs["nfd_attributes"] = False  # no sink publishes pci.device (rules turn it on)
        kwargs["health"] = self.health.tracker
        if not self.health.restored:
            self._read_back()
        self.health.before_scan()
        rules = self.cfg.rules
        if rules is None and os.path.isdir(DEFAULT_RULES_DIR):
            rules = DEFAULT_RULES_DIR
        if rules:
            # One broken rule must not take the others (or the agent) down; a file that
            # breaks keeps its last valid rules (rulefiles.py)
            kwargs["rules"] = self._rules.load(rules)
            kwargs["rule_outputs"] = self._rule_outputs
        result = self._scan(self.cfg.root, **kwargs)
        self.health.after_scan(result, self._nvml.status if self._nvml is not None else "none")
        return result

    def _read_back(self) -> None:
        """Before the first pass, read the held health an earlier run published.

        - It comes from the first sink whose output holds one; see agent/heldstate.py.
        - An API that cannot be reached yet is tried again next pass.
        - A state that cannot be read is ignored with a warning.
        """
        for sink in self.sinks:
            try:
                text = sink.read_state()
            except Exception as e:  # SinkError, or a bug: never a reason not to start
                if isinstance(e, SinkError) and e.transient:
                    if self._read_back_said != str(e):
                        log.warning("%s: held health not read yet (%s); trying again next "
                                    "pass", sink.where(), e)  # fmt: skip
                    self._read_back_said = str(e)
                    return
                log.warning("%s: held health not read: %s", sink.where(), one_line(e))
                continue
            if text:
                self.health.restore(text, sink.where())
                return
        self.health.restore(None, "")

    def _nvml_session(self) -> NvmlSession:
        """One NVML session for the agent's life.

        - NVML stays initialised between passes.
        - The last NVML facts are kept while the same GPUs and driver are present.
        """
        if self._nvml is None or self._nvml.mode != self.cfg.nvml:
            if self._nvml is not None:
                self._nvml.close()
            self._nvml = NvmlSession(self.cfg.nvml, keep=True)
        return self._nvml

    def _nvidia_options(self) -> NvidiaOptions:
        """MIG strategy and sharing config.

        - The file is re-read every pass; a broken one keeps its last valid version, lastvalid.py.
        - ``gfd.timestamp``, ``gfd_timestamp``, is the agent's start time, the same every pass.
        """
        stamp = self.started if self.cfg.gfd_timestamp else None
        # one builder with scan (sharing_config.nvidia_options): a given strategy wins
        fallback = nvidia_options(self.cfg.mig_strategy, None, stamp)
        path = self.cfg.sharing_config
        if path:
            strategy = self.cfg.mig_strategy
            return self._sharing.get(path, lambda: nvidia_options(strategy, path, stamp), fallback)
        return fallback

    def run_pass(self) -> bool:
        """Scan and publish once. True when every sink holds a complete scan's result.

        The invariant: only what a complete, successful scan found is published. A scan that
        raised, or hit an error it did not expect, publishes nothing new. Such errors are
        ``result.errors``: out of descriptors or memory, a directory listing that failed. The
        last good publication is handed to the sinks again, so a feature file's expiry is
        refreshed and nothing changes on the API server. The reason is logged and counted,
        ``nfd_gpu_scans_total{result="error"|"incomplete"}``, and /readyz reports it.
        """
        self.passes += 1
        t0 = time.perf_counter()
        try:
            result = self.scan()
        except Exception as exc:
            if type(exc).__name__ == "NvmlRequired":  # --nvml on: keep the last publication
                log.error("scan: %s; keeping the last good labels", exc)
            else:
                # RecursionError, MemoryError, a bug: never a reason to drop labels
                log.error(
                    "scan failed, keeping the last good labels: %s", one_line(exc), exc_info=True
                )
            if self.metrics is not None:
                self.metrics.observe_scan("error", time.perf_counter() - t0)
            return self._keep_last_good(f"scan failed: {one_line(exc)}")
        duration = time.perf_counter() - t0
        nvml = self._nvml
        if nvml is not None:
            if (nvml.status, nvml.reason) != self._nvml_state:
                self._nvml_state = (nvml.status, nvml.reason)
                why = f" ({nvml.reason})" if nvml.reason else ""
                log.info("NVIDIA facts from: %s%s", nvml.status, why)
            if self.metrics is not None:
                self.metrics.observe_nvml(nvml.status)
        if self.metrics is not None:
            self.health.observe(self.metrics, result)
        if result.warnings != self._last_warnings:
            for w in result.warnings:
                log.warning("scan: %s", w)
            self._last_warnings = list(result.warnings)
        errors = result.errors
        if errors:
            log.error(
                "scan incomplete (%d error(s)), keeping the last good labels: %s",
                len(errors),
                errors[0],
            )
            if self.metrics is not None:
                self.metrics.observe_scan("incomplete", duration)
            return self._keep_last_good(f"scan incomplete: {errors[0]}")
        if self.metrics is not None:
            self.metrics.observe_scan(
                "warning" if result.warnings else "ok",
                duration,
                gpus=result.gpu_count_by_vendor,
                labels=len(result.labels),
                warnings=len(result.warnings),
                rule_errors=len(result.rule_errors),
            )
        if (blocked := self._blocked(result)) is not None:
            return self._keep_last_good(blocked)
        pub = self._publication(result)
        self._last_good = pub
        ok = self._publish(pub)
        log.debug(
            "pass %d: scan %.1f ms, GPUs %s, %d labels, %d warning(s), %d rule error(s); %s",
            self.passes, duration * 1000,
            ",".join(f"{v}={n}" for v, n in result.gpu_count_by_vendor.items()) or "none",
            len(result.labels), len(result.warnings), len(result.rule_errors),
            "every sink holds it" if ok else "not every sink took it",
        )  # fmt: skip
        if self.metrics is not None:
            if ok:
                self.metrics.published_all()
            elif not self.publisher.refused:
                # readiness: this agent scans and can publish; an API outage is not its
                # fault (nfd_gpu_publish_failing shows it), a refusal is
                self.metrics.mark_ready()
            self.metrics.beat()
        return ok

    def _publication(self, result: ScanResult) -> Publication:
        """What a complete scan publishes.

        Its labels and features, and the held health for the next run; see agent/heldstate.py.
        """
        state = self.health.state(result.snapshot.lost_gpus)
        return Publication(dict(result.labels), result.features, state)

    def _blocked(self, result: ScanResult) -> str | None:
        """Why a complete scan's result must not be published; said once per reason.

        - A configuration file with no valid version, lastvalid.py.
        - Labels over the size limit.
        """
        big = too_large(result.labels, result.rule_labels)
        if big != self._too_large and big is not None:
            log.error("scan: %s", big)
        self._too_large = big
        return self.stale.blocking() or big

    def _keep_last_good(self, reason: str) -> bool:
        """Hand the last good publication to the sinks again; the pass still fails."""
        self.publisher.transient = False
        if self._last_good is not None:
            self._publish(self._last_good)
        if self.metrics is not None:
            self.metrics.not_ready(reason + " (the last good labels are kept)")
            self.metrics.beat()
        return False

    def _publish(self, pub: Publication) -> bool:
        """Publish; a signal meanwhile ends the loop once the write has finished."""
        cuttable, self._cuttable = self._cuttable, False
        try:
            return self.publisher.publish(pub, self._stopping)
        finally:
            self._cuttable = cuttable and not self.stop_event.is_set()

    def _stopping(self) -> bool:
        """Whether stop was requested and its grace period is over: no further sink is written."""
        return (
            self.stop_event.is_set()
            and self._stop_at is not None
            and time.monotonic() >= self._stop_at
        )

    def _reload(self) -> None:
        self._reload_requested.clear()
        if self._reload_fn is None:
            return
        where = self.config_file or "configuration"
        try:
            new = self._reload_fn()
        except Exception as e:  # ConfigError, SinkError from a new kubeconfig
            self.stale.stale(where, f"reload failed: {str(e).removeprefix(where + ': ')}")
            return
        key = sink_settings(new)
        if key != self._sink_key:
            try:
                sinks = build_sinks(new)
            except SinkError as e:
                self.stale.stale(where, f"reload failed: {e}")
                return
            for gone in self.publisher.sinks:
                gone.detach()  # its watch; what it published stays for the new sinks
            self.publisher.sinks = sinks
            self._attach(sinks)
            self._sink_key = key
        old, self.cfg = self.cfg, new
        if self.metrics is not None:
            self.metrics.liveness_timeout = liveness_timeout(new)
        if new.metrics_address != old.metrics_address:
            self._move_metrics(old.metrics_address)
        self.health.reload(new)  # held states stay
        setup_logging(new.log_format, new.log_level)
        self.stale.valid(where)
        log.info("configuration reloaded: %s changed", changes(old, new))

    def _delay(self, ok: bool) -> float:
        if ok:
            self._failures = 0
            return self.cfg.interval
        self._failures += 1
        if not self.publisher.transient:
            return self.cfg.interval
        backoff = min(self.cfg.interval, 0.5 * 2 ** min(self._failures - 1, 10))
        return float(backoff * self._rng.uniform(0.8, 1.2))

    def _wait(self, delay: float) -> None:
        deadline = time.monotonic() + delay
        while not self.stop_event.is_set():
            if self._reload_requested.is_set():
                return
            with self._udev_lock:
                udev_at = self._udev_at
            now = time.monotonic()
            if self._drift.is_set():
                at = self._pacer.not_before()
                if now >= at:
                    self._drift.clear()
                    self._pacer.ran(now, self.cfg.interval)
                    return
                deadline = min(deadline, at)
            if udev_at is not None:
                quiet_until = udev_at + self.cfg.udev_debounce
                if now >= quiet_until:
                    with self._udev_lock:
                        self._udev_at = None
                    return
                deadline = min(deadline, quiet_until)
            if now >= deadline:
                return
            self._wake.wait(deadline - now)
            self._wake.clear()

    def start_metrics(self) -> None:
        if not self.cfg.metrics_address or self.metrics is None:
            return
        host, port = split_address(self.cfg.metrics_address)
        self.metrics.liveness_timeout = liveness_timeout(self.cfg)
        self.metrics_server = MetricsServer(self.metrics, host, port).start()
        h, p = self.metrics_server.address
        log.info("metrics listening on http://%s:%d/metrics", h, p)

    def _move_metrics(self, old_address: str) -> None:
        """Serve metrics at the new ``metrics_address`` after a reload; nowhere when it is empty.

        Where the new address cannot be bound, the old one is served again and kept in the
        configuration, so a later reload tries again.
        """
        if self.metrics_server is not None:
            self.metrics_server.stop()
            self.metrics_server = None
        try:
            self.start_metrics()
        except OSError as e:
            log.error("metrics: cannot listen on %s: %s; staying on %s",
                      self.cfg.metrics_address, e.strerror or e, old_address)  # fmt: skip
            self.cfg = replace(self.cfg, metrics_address=old_address)
            with contextlib.suppress(OSError):
                self.start_metrics()

    def run(self) -> int:
        """The loop. Returns the exit code; oneshot: 0 if published, 1 if not."""
        self._install_signals()
        log.info("%s", startup_line(self.cfg))
        warn_deprecated(self.cfg)
        self.start_metrics()
        retire_outputs(self.cfg)  # one request (api_timeout) with the probes up
        udev: UdevTrigger | None = None
        if self.cfg.udev and not self.cfg.oneshot:
            udev = UdevTrigger(self.udev_event)
            if not udev.start():
                udev = None
        code = 0
        try:
            self._cuttable = True
            while not self.stop_event.is_set():
                if self._reload_requested.is_set():
                    self._reload()
                ok = self.run_pass()
                if self.cfg.oneshot:
                    code = 0 if ok else 1
                    break
                delay = self._delay(ok)
                log.debug("next pass in %.3g s (or on a udev event or SIGHUP)", delay)
                self._wait(delay)
        except _Stopped:
            log.info("stopped while nothing was being written")
            code = 1 if self.cfg.oneshot else 0  # oneshot: 0 only if published
        finally:
            self._cuttable = False
            if udev is not None:
                udev.stop()
            for sink in self.sinks:
                sink.close()
            if self._nvml is not None:
                self._nvml.close()
            self.health.stop()
            if self.metrics_server is not None:
                self.metrics_server.stop()
        log.info("stopped after %d passes", self.passes)
        self._done.set()
        return code
