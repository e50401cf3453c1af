"""The agent: scan -> publish, once or forever.

A pass runs on a timer (``interval``), on debounced udev events (pyudev kernel monitor on
``pci`` and ``drm``; the only module importing pyudev, lazily), and on SIGHUP (which also
reloads the configuration; rules are re-read by every scan). SIGTERM/SIGINT stop the loop
once the current write has finished. A failed publish is retried with jittered
exponential back-off (capped at the interval); the agent never exits because the API
server or the disk misbehaves.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import Any, Protocol, cast

from nfd_gpu.config import Config, split_address
from nfd_gpu.features import Features
from nfd_gpu.sinks import Publication, Sink, SinkError

# Rules applied on every pass when --rules is not given (and the directory exists).
DEFAULT_RULES_DIR = "/etc/nfd-gpu/rules.d"
# SIGTERM/SIGINT: the process ends within this many seconds, whatever it is waiting for.
STOP_GRACE = 4.0

log = logging.getLogger(__name__)


class ScanResultLike(Protocol):
    labels: dict[str, str]
    features: Features
    warnings: list[str]
    gpu_count_by_vendor: dict[str, int]


ScanFn = Callable[..., ScanResultLike]


def default_scan() -> ScanFn:
    """``nfd_gpu.scan.run_scan`` (imported on first use)."""
    mod = importlib.import_module("nfd_gpu.scan")
    return cast(ScanFn, mod.run_scan)


# -- logging ------------------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """One stderr handler; with ``json`` every line is one JSON record, tracebacks
    included (an exception in any thread is logged, never printed raw)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "?"
        log.error(
            "uncaught exception in thread %s",
            name,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    threading.excepthook = thread_hook

    def main_hook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.critical("uncaught exception", exc_info=(exc_type, exc, tb))

    sys.excepthook = main_hook


def nvml_state(mode: str, root: str) -> str:
    """The NVML a pass will ask (``--nvml`` mode, then what it finds), for the start-up line.
    The library is tried once here (``nvmlInit``/``nvmlShutdown``); every pass reports its
    own source afterwards ("NVIDIA facts from")."""
    if mode == "off":
        return "off"
    from nfd_gpu.discovery import nvml  # lazy
    from nfd_gpu.discovery.nvidia import NVML_RECORDING

    rec = os.path.join(root, NVML_RECORDING)
    if os.path.isfile(rec):
        return f"{mode}: replay {rec}"

    lib = nvml.load_library()
    if lib is None:
        return f"{mode}: library unavailable (nvidia-ml-py not installed)"
    try:
        lib.nvmlInit()
    except Exception as e:  # no libnvidia-ml, driver not loaded
        return f"{mode}: library unavailable ({' '.join(str(e).split()) or type(e).__name__})"
    try:
        version = lib.nvmlSystemGetDriverVersion()
        if isinstance(version, bytes):
            version = version.decode("utf-8", "replace")
        return f"{mode}: library ok (driver {version})"
    except Exception:
        return f"{mode}: library ok"
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()


def startup_line(cfg: Config) -> str:
    """The one line ``run`` logs at start: version and the settings that shape a pass."""
    from nfd_gpu import __version__

    mode = "oneshot" if cfg.oneshot else f"interval {cfg.interval:g}s"
    parts = [
        f"nfd-gpu {__version__} starting:",
        f"outputs={','.join(cfg.outputs)}",
        f"profiles={','.join(cfg.profiles)}",
        f"root={cfg.root}",
        f"nvml={nvml_state(cfg.nvml, cfg.root)}",
        mode,
    ]
    if "featurefile" in cfg.outputs:
        parts.append(f"features={os.path.join(cfg.features_dir, cfg.features_file)}")
    if "nodefeature" in cfg.outputs:
        parts.append(f"nodefeature={cfg.namespace}/nfd-gpu-{cfg.node_name}")
    parts.append(f"rules={cfg.rules or DEFAULT_RULES_DIR + ' (if present)'}")
    parts.append(f"metrics={cfg.metrics_address or 'off'}")
    return " ".join(parts)


def label_changes(old: dict[str, str] | None, new: dict[str, str]) -> tuple[int, int, int]:
    """(added, removed, changed) label counts from ``old`` (None: nothing published) to
    ``new``."""
    old = old or {}
    added = sum(1 for k in new if k not in old)
    removed = sum(1 for k in old if k not in new)
    changed = sum(1 for k, v in new.items() if k in old and old[k] != v)
    return added, removed, changed


# -- sinks --------------------------------------------------------------------------------


def _sink_settings(cfg: Config) -> tuple[Any, ...]:
    return (
        cfg.outputs,
        cfg.features_dir,
        cfg.features_file,
        cfg.expiry,
        cfg.raw_features,
        cfg.remove_on_exit,
        cfg.node_name,
        cfg.namespace,
        cfg.pod_name,
        cfg.pod_uid,
        cfg.owner_refs,
        cfg.kubeconfig,
        cfg.api_timeout,
        cfg.resync_interval,
        cfg.dry_run,
    )


def build_sinks(cfg: Config) -> list[Sink]:
    """The configured sinks; raises SinkError for an unusable Kubernetes configuration."""
    if cfg.dry_run:
        from nfd_gpu.sinks.dryrun import dry_run_sinks

        return dry_run_sinks(cfg)
    sinks: list[Sink] = []
    for out in cfg.outputs:
        if out == "featurefile":
            from nfd_gpu.sinks.featurefile import FeatureFileSink

            sinks.append(
                FeatureFileSink(
                    cfg.features_dir,
                    cfg.features_file,
                    expiry=cfg.expiry,
                    raw_features=cfg.raw_features,
                    remove_on_exit=cfg.remove_on_exit,
                )
            )
        elif out == "hook":
            from nfd_gpu.sinks.hook import HookSink

            sinks.append(HookSink(raw_features=cfg.raw_features))
        elif out == "nodefeature":
            from nfd_gpu.sinks.nodefeature import NodeFeatureSink, build_api_client

            assert cfg.node_name and cfg.namespace  # checked by config validation
            sinks.append(
                NodeFeatureSink(
                    node_name=cfg.node_name,
                    namespace=cfg.namespace,
                    api_client=build_api_client(cfg.kubeconfig, timeout=cfg.api_timeout),
                    owner_refs=cfg.owner_refs,
                    pod_name=cfg.pod_name,
                    pod_uid=cfg.pod_uid,
                    timeout=cfg.api_timeout,
                    resync_interval=cfg.resync_interval,
                )
            )
    return sinks


# -- udev ---------------------------------------------------------------------------------


class UdevTrigger:
    """Calls ``callback()`` on kernel uevents of the pci and drm subsystems."""

    SUBSYSTEMS = ("pci", "drm")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self._observer: Any = None

    def on_event(self, action: str | None, subsystem: str | None) -> None:
        if subsystem in self.SUBSYSTEMS:
            log.debug("udev %s event on %s", action, subsystem)
            self.callback()

    def start(self) -> bool:
        try:
            import pyudev as _pyudev  # lazy

            pyudev: Any = _pyudev
            monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="kernel")
            for sub in self.SUBSYSTEMS:
                monitor.filter_by(sub)
            observer = pyudev.MonitorObserver(
                monitor, callback=lambda dev: self.on_event(dev.action, dev.subsystem)
            )
            observer.daemon = True
            observer.start()
        except Exception as e:  # ImportError, no netlink permission, no libudev
            log.warning("udev trigger unavailable, using the timer only: %s", e)
            return False
        self._observer = observer
        log.info("udev trigger on %s", ", ".join(self.SUBSYSTEMS))
        return True

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.send_stop()


# -- agent --------------------------------------------------------------------------------


class Agent:
    def __init__(
        self,
        cfg: Config,
        *,
        scan: ScanFn | None = None,
        sinks: Sequence[Sink] | None = None,
        reload: Callable[[], Config] | None = None,
        metrics: Any = None,
    ) -> None:
        self.cfg = cfg
        self._scan = scan
        # gfd.timestamp: fixed once per process start (as GFD), so passes stay unchanged.
        self.started = int(time.time())
        self.sinks: list[Sink] = list(sinks) if sinks is not None else build_sinks(cfg)
        self._reload_fn = reload
        self.metrics = metrics
        self.stop_event = threading.Event()
        self._wake = threading.Event()
        self._reload_requested = threading.Event()
        self._udev_at: float | None = None
        self._udev_lock = threading.Lock()
        self._failures = 0
        self._transient = False
        self._last_warnings: list[str] = []
        self._rng = random.Random()
        self.metrics_server: Any = None
        self.passes = 0
        self._last_good: Publication | None = None  # what the last complete scan found
        self._stop_at: float | None = None  # monotonic deadline once SIGTERM arrived
        self._done = threading.Event()  # run() has finished (the watchdog stands down)
        self._nvml: Any = None  # NvmlSession kept across passes (built on first use)
        self._nvml_state: tuple[str, str | None] = ("none", None)
        # labels and features of the last publish that wrote (for the change log line)
        self._published: dict[str, str] | None = None
        self._published_features: Features | None = None

    # signals / triggers
    def request_stop(self, *_: Any) -> None:
        """Stop: the loop ends after the current pass; in-flight API requests are cut
        off (``Sink.abort``) and a watchdog ends the process STOP_GRACE seconds later
        whatever is still running (every write is atomic, so nothing is damaged)."""
        if self._stop_at is None:
            self._stop_at = time.monotonic() + STOP_GRACE
        self.stop_event.set()
        self._wake.set()
        for sink in self.sinks:
            abort = getattr(sink, "abort", None)
            if abort is not None:
                abort()

    def request_reload(self, *_: Any) -> None:
        self._reload_requested.set()
        self._wake.set()

    def udev_event(self) -> None:
        with self._udev_lock:
            self._udev_at = time.monotonic()
        self._wake.set()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_stop(signum: int, frame: FrameType | None) -> None:
            log.info("received %s, stopping after the current pass", signal.Signals(signum).name)
            first = self._stop_at is None
            self.request_stop()
            if first:
                threading.Thread(target=self._watchdog, name="stop-watchdog", daemon=True).start()

        def on_hup(signum: int, frame: FrameType | None) -> None:
            log.info("received SIGHUP: reloading configuration and rescanning")
            self.request_reload()

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_hup)

    def _watchdog(self) -> None:
        """Runs after SIGTERM/SIGINT: the process is gone STOP_GRACE seconds later."""
        if self._done.wait(STOP_GRACE):
            return
        log.error("stop: the current pass did not end within %.0f s, exiting now", STOP_GRACE)
        logging.shutdown()
        os._exit(0)

    # one pass
    def scan(self) -> ScanResultLike:
        if self._scan is None:
            self._scan = default_scan()
        kwargs: dict[str, Any] = {"profiles": self.cfg.profiles}
        if self.cfg.profile_options:
            kwargs["profile_options"] = self.cfg.profile_options
        if "nvidia" in self.cfg.profiles and (
            self.cfg.mig_strategy != "none" or self.cfg.sharing_config or self.cfg.gfd_timestamp
        ):
            kwargs["nvidia_options"] = self._nvidia_options()
        kwargs["nvml"] = self._nvml_session()
        rules = self.cfg.rules
        if rules is None and os.path.isdir(DEFAULT_RULES_DIR):
            rules = DEFAULT_RULES_DIR
        if rules:
            # One broken rule must not take the others (or the agent) down.
            kwargs["rules_path"] = rules
            kwargs["tolerant_rules"] = True
        return self._scan(self.cfg.root, **kwargs)

    def _nvml_session(self) -> Any:
        """One NVML session for the agent's life: NVML stays initialised between passes and
        the last NVML facts are kept while the same GPUs and driver are present."""
        from nfd_gpu.discovery.nvml_session import NvmlSession

        if self._nvml is None or self._nvml.mode != self.cfg.nvml:
            if self._nvml is not None:
                self._nvml.close()
            self._nvml = NvmlSession(self.cfg.nvml, keep=True)
        return self._nvml

    def _nvidia_options(self) -> Any:
        """MIG strategy and sharing config; the file is re-read every pass (a bad one warns).

        ``gfd.timestamp`` (``gfd_timestamp``) is the agent's start time, the same every pass."""
        from nfd_gpu.labels.nvidia import NvidiaOptions
        from nfd_gpu.sharing_config import load_sharing_config

        strategy = self.cfg.mig_strategy if self.cfg.mig_strategy != "none" else None
        stamp = self.started if self.cfg.gfd_timestamp else None
        if self.cfg.sharing_config:
            try:
                return load_sharing_config(self.cfg.sharing_config, strategy, stamp)
            except ValueError as exc:
                log.warning("sharing config ignored: %s", exc)
        return NvidiaOptions(mig_strategy=self.cfg.mig_strategy, timestamp=stamp)

    def run_pass(self) -> bool:
        """Scan and publish once. True when every sink holds a complete scan's result.

        The invariant: only what a complete, successful scan found is published. A scan
        that raised, or that hit an error it did not expect (out of descriptors or
        memory, a directory listing that failed: ``result.errors``), publishes nothing
        new: the last good publication is handed to the sinks again (so a feature file's
        expiry is refreshed and nothing changes on the API server), the reason is logged
        and counted (``nfd_gpu_scans_total{result="error"|"incomplete"}``) and /readyz
        reports it."""
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
                    "scan failed, keeping the last good labels: %s", _one_line(exc), exc_info=True
                )
            if self.metrics is not None:
                self.metrics.observe_scan("error", time.perf_counter() - t0)
            return self._keep_last_good(f"scan failed: {_one_line(exc)}")
        duration = time.perf_counter() - t0
        nvml = self._nvml
        if nvml is not None:
            if (nvml.status, nvml.reason) != self._nvml_state:
                self._nvml_state = (nvml.status, nvml.reason)
                why = f" ({nvml.reason})" if nvml.reason else ""
                log.info("NVIDIA facts from: %s%s", nvml.status, why)
            if self.metrics is not None:
                self.metrics.observe_nvml(nvml.status)
        if result.warnings != self._last_warnings:
            for w in result.warnings:
                log.warning("scan: %s", w)
            self._last_warnings = list(result.warnings)
        errors = list(getattr(result, "errors", ()) or ())
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
                rule_errors=len(getattr(result, "rule_errors", ()) or ()),
            )
        pub = Publication(dict(result.labels), result.features)
        self._last_good = pub
        ok = self._publish(pub)
        if self.metrics is not None:
            if ok:
                self.metrics.published_all()
            self.metrics.beat()
        return ok

    def _log_publish(self, sinks: list[str], pub: Publication) -> None:
        """One line per publish that changed something: label counts added / removed /
        changed (a feature-file expiry refresh changes nothing and logs only its write)."""
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
        self._published = dict(pub.labels)
        self._published_features = copy.deepcopy(pub.features)

    def _keep_last_good(self, reason: str) -> bool:
        """Hand the last good publication to the sinks again; the pass still fails."""
        self._transient = False
        if self._last_good is not None:
            self._publish(self._last_good)
        if self.metrics is not None:
            self.metrics.not_ready(reason + " (the last good labels are kept)")
            self.metrics.beat()
        return False

    def _publish(self, pub: Publication) -> bool:
        ok = True
        written: list[str] = []
        self._transient = False
        for sink in self.sinks:
            if self.stop_event.is_set() and self._stop_deadline_passed():
                ok = False
                break
            try:
                wrote = sink.publish(pub)
            except Exception as e:  # SinkError, or a bug: the loop (and the labels) survive
                ok = False
                transient = isinstance(e, SinkError) and e.transient
                self._transient = self._transient or transient
                if isinstance(e, SinkError):
                    log.error("%s: %s", sink.name, e)
                else:
                    log.error("%s: unexpected %s", sink.name, _one_line(e), exc_info=True)
                if self.metrics is not None:
                    self.metrics.observe_publish(sink.name, "error")
                    self.metrics.not_ready(f"{sink.name}: {e}")
                continue
            if self.metrics is not None:
                self.metrics.observe_publish(sink.name, "written" if wrote else "unchanged")
            if wrote:
                written.append(sink.name)
        if written:
            self._log_publish(written, pub)
        return ok

    def _stop_deadline_passed(self) -> bool:
        return self._stop_at is not None and time.monotonic() >= self._stop_at

    def _reload(self) -> None:
        self._reload_requested.clear()
        if self._reload_fn is None:
            return
        try:
            new = self._reload_fn()
        except Exception as e:  # ConfigError, SinkError from a new kubeconfig
            log.error("reload failed, keeping the previous configuration: %s", e)
            return
        if _sink_settings(new) != _sink_settings(self.cfg):
            try:
                sinks = build_sinks(new)
            except SinkError as e:
                log.error("reload failed, keeping the previous configuration: %s", e)
                return
            self.sinks = sinks
        self.cfg = new
        setup_logging(new.log_format, new.log_level)
        log.info("configuration reloaded")

    def _delay(self, ok: bool) -> float:
        if ok:
            self._failures = 0
            return self.cfg.interval
        self._failures += 1
        if not self._transient:
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
        from nfd_gpu.metrics import MetricsServer

        host, port = split_address(self.cfg.metrics_address)
        self.metrics.liveness_timeout = max(300.0, 5 * self.cfg.interval)
        self.metrics_server = MetricsServer(self.metrics, host, port).start()
        h, p = self.metrics_server.address
        log.info("metrics listening on http://%s:%d/metrics", h, p)

    def run(self) -> int:
        """The loop. Returns the exit code (oneshot: 0 if published, 1 if not)."""
        self._install_signals()
        log.info("%s", startup_line(self.cfg))
        self.start_metrics()
        udev: UdevTrigger | None = None
        if self.cfg.udev and not self.cfg.oneshot:
            udev = UdevTrigger(self.udev_event)
            if not udev.start():
                udev = None
        code = 0
        try:
            while not self.stop_event.is_set():
                if self._reload_requested.is_set():
                    self._reload()
                ok = self.run_pass()
                if self.cfg.oneshot:
                    code = 0 if ok else 1
                    break
                self._wait(self._delay(ok))
        finally:
            if udev is not None:
                udev.stop()
            for sink in self.sinks:
                sink.close()
            if self._nvml is not None:
                self._nvml.close()
            if self.metrics_server is not None:
                self.metrics_server.stop()
        log.info("stopped after %d passes", self.passes)
        self._done.set()
        return code


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def rss_bytes() -> int:
    """Current resident set size (Linux), for the benchmark."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
