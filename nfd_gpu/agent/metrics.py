"""Prometheus metrics and health endpoints.

This is the only module importing prometheus_client.

- ``/metrics``: the text exposition.
- ``/healthz``: 200 while the agent loop is alive.
- ``/readyz``: 200 when **this agent scans and can publish**.
- ``/startedz``: 200 once the agent's first pass has ended, whatever its outcome: the
  manifests' startup probe, polled each second until then, so the kubelet runs the
  readiness probe as soon as there is something to judge (docs/install.md).

Ready means the last pass scanned completely, and every sink either holds its result or
failed only in a way that passes by itself. Such a failure is an API outage: 5xx, 429,
timeouts, refused connections. It shows in ``nfd_gpu_publish_failing{sink}`` and the
body, not as 503, so an outage does not stall a rollout.

``/readyz`` is 503 with the reason:

- before the first complete pass;
- when a sink refused the write: 403, 401, an invalid object, a disk error;
- while an incomplete scan keeps the last good labels.

The body of a 200 lists what is degraded: a transient publish failure, or a configuration
file kept at its last valid version, ``nfd_gpu_config_stale{file}``.

``httpserve.py`` beside it serves them on ``--metrics-address``:

- one thread that sleeps while idle;
- a deadline per request;
- a bounded number of connections where a new one, a probe, always gets in;
- so slow clients and scrapes cannot starve the probes, and a scan always has the
  descriptors it needs.

Each Metrics object has its own registry.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from nfd_gpu import __version__, lazypkg
from nfd_gpu.agent import httpserve
from nfd_gpu.sinks.registry import OUTPUTS

TEXT = "text/plain; charset=utf-8"

NVML_SOURCES = ("nvml", "replay", "stale", "procfs", "off", "none")


def _client() -> Any:
    """The metric types and the registry of prometheus_client, without its ``__init__``.

    - The ``__init__`` imports the exposition too: an HTTP server, WSGI, ``urllib.request``.
    - The agent's first publish needs none of it: ~10 ms CPU of its start-up.
    - The first scrape imports it, by :func:`_exposition`.
    """
    with lazypkg.LOCK:
        lazypkg.lazy_package("prometheus_client")
        # each by its full name (nfd_gpu/lazypkg.py), values first: metrics runs
        # `from . import values`
        for sub in ("values", "metrics", "registry"):
            importlib.import_module(f"prometheus_client.{sub}")
    pc: Any = sys.modules["prometheus_client"]
    return SimpleNamespace(
        CollectorRegistry=pc.registry.CollectorRegistry,
        Counter=pc.metrics.Counter,
        Gauge=pc.metrics.Gauge,
        Histogram=pc.metrics.Histogram,
    )


def _exposition() -> Any:
    """prometheus_client's text exposition: ``generate_latest``, ``CONTENT_TYPE_LATEST``."""
    with lazypkg.LOCK:
        return importlib.import_module("prometheus_client.exposition")


class Metrics:
    def __init__(self) -> None:
        pc = _client()
        self.registry = pc.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.build_info = pc.Gauge(
            "nfd_gpu_build_info", "nfd-gpu build information", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)
        self.scans = pc.Counter(
            "nfd_gpu_scans_total",
            "Scan passes by result (ok, warning, incomplete, error); incomplete and error "
            "passes publish nothing new (the last good labels are kept)",
            ["result"],
            registry=r,
        )
        self.scan_duration = pc.Histogram(
            "nfd_gpu_scan_duration_seconds",
            "Duration of one scan pass",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.gpus = pc.Gauge("nfd_gpu_gpus", "GPUs found by vendor", ["vendor"], registry=r)
        self.labels = pc.Gauge("nfd_gpu_labels", "Labels in the last scan result", registry=r)
        self.publishes = pc.Counter(
            "nfd_gpu_publish_total",
            "Publish attempts by sink and result (written, unchanged, error)",
            ["sink", "result"],
            registry=r,
        )
        self.last_publish = pc.Gauge(
            "nfd_gpu_last_publish_timestamp_seconds",
            "Unix time of the last successful publish (all sinks)",
            registry=r,
        )
        self.rule_errors = pc.Counter(
            "nfd_gpu_rule_errors_total", "Rule evaluation or rule file errors", registry=r
        )
        self.warnings = pc.Gauge("nfd_gpu_warnings", "Warnings in the last scan", registry=r)
        self.http_rejected = pc.Counter(
            "nfd_gpu_http_rejected_connections_total",
            "Metrics-port connections closed unserved (the oldest, when every slot is held; "
            "past the request deadline; a request head too large)",
            registry=r,
        )
        self.nvml_stale = pc.Gauge(
            "nfd_gpu_nvml_stale",
            "1 when the last scan used the last known NVML facts because NVML did not answer",
            registry=r,
        )
        self.nvml_source = pc.Gauge(
            "nfd_gpu_nvml_source",
            "Where the last scan's NVIDIA facts came from (1 for the current source): "
            "nvml, replay, stale, procfs, off, none (no NVIDIA GPU)",
            ["source"],
            registry=r,
        )
        self._own_output_metrics(pc, r)
        for output in OUTPUTS.values():
            if output.repairs:
                self.repairs.labels(output=output.name)
        self.notes: dict[str, str] = {}  # degraded but ready: listed in /readyz's body
        self.health = HealthMetrics(pc, r)
        for res in ("ok", "warning", "incomplete", "error"):
            self.scans.labels(result=res)
        self._vendors: set[str] = set()
        self.ready = threading.Event()
        self.not_ready_reason = "not published yet"
        self.heartbeat = time.monotonic()
        self.started = False  # a pass has ended: /startedz
        self.liveness_timeout = 300.0

    def _own_output_metrics(self, pc: Any, r: Any) -> None:
        """Repairs of the published outputs, publish failures, stale configuration."""
        self.repairs = pc.Counter(
            "nfd_gpu_repairs_total",
            "Published outputs restored after they were changed behind the agent's back "
            "(NodeFeature deleted, edited or relabelled; feature file edited or removed)",
            ["output"],
            registry=r,
        )
        self.publish_failing = pc.Gauge(
            "nfd_gpu_publish_failing",
            "1 while the last publish to this sink failed (an API outage: /readyz stays 200 "
            "for transient failures)",
            ["sink"],
            registry=r,
        )
        self.config_stale = pc.Gauge(
            "nfd_gpu_config_stale",
            "1 while this configuration file is unreadable or invalid and its last valid "
            "version is used",
            ["file"],
            registry=r,
        )

    def observe_scan(
        self,
        result: str,
        duration: float,
        *,
        gpus: Mapping[str, int] | None = None,
        labels: int | None = None,
        warnings: int | None = None,
        rule_errors: int = 0,
    ) -> None:
        self.scans.labels(result=result).inc()
        self.scan_duration.observe(duration)
        if gpus is not None:
            for vendor in self._vendors - set(gpus):
                self.gpus.labels(vendor=vendor).set(0)
            for vendor, n in gpus.items():
                self.gpus.labels(vendor=vendor).set(n)
            self._vendors |= set(gpus)
        if labels is not None:
            self.labels.set(labels)
        if warnings is not None:
            self.warnings.set(warnings)
        if rule_errors:
            self.rule_errors.inc(rule_errors)

    def observe_nvml(self, status: str) -> None:
        self.nvml_stale.set(1 if status == "stale" else 0)
        for s in NVML_SOURCES:
            self.nvml_source.labels(source=s).set(1 if s == status else 0)

    def observe_publish(self, sink: str, result: str) -> None:
        self.publishes.labels(sink=sink, result=result).inc()

    def published_all(self) -> None:
        self.last_publish.set(time.time())
        self.ready.set()

    def mark_ready(self) -> None:
        """Mark the pass scanned completely, with every sink failure transient."""
        self.ready.set()

    def publish_failed(self, sink: str, reason: str, transient: bool) -> None:
        self.publish_failing.labels(sink=sink).set(1)
        if transient:
            self.notes[f"sink {sink}"] = f"publishing failing (retried): {reason}"
        else:
            self.not_ready(reason)

    def publish_ok(self, sink: str) -> None:
        self.publish_failing.labels(sink=sink).set(0)
        self.notes.pop(f"sink {sink}", None)

    def set_degraded(self, sink: str, reason: str | None) -> None:
        """Set why ``sink`` works less well than it should, a ``/readyz`` line."""
        if reason is None:
            self.notes.pop(f"degraded {sink}", None)
        else:
            self.notes[f"degraded {sink}"] = f"{sink}: {reason}"

    def observe_repair(self, output: str) -> None:
        self.repairs.labels(output=output).inc()

    def set_config_stale(self, file: str, reason: str | None) -> None:
        """Set why ``file``'s last valid version is used; None when it is valid."""
        self.config_stale.labels(file=file).set(0 if reason is None else 1)
        if reason is None:
            self.notes.pop(f"file {file}", None)
        else:
            self.notes[f"file {file}"] = f"{file}: stale, its last valid version is used: {reason}"

    def readyz(self) -> tuple[int, bytes]:
        if not self.ready.is_set():
            return 503, (self.not_ready_reason + "\n").encode("utf-8", "replace")
        notes = "".join(f"{v}\n" for _, v in sorted(self.notes.copy().items()))
        return 200, ("ok\n" + notes).encode("utf-8", "replace")

    def not_ready(self, reason: str) -> None:
        """Mark the node's labels not the latest scan's, as the module docstring says."""
        self.not_ready_reason = reason
        self.ready.clear()

    def beat(self) -> None:
        """A pass ended (every pass ends here, whatever its outcome)."""
        self.heartbeat = time.monotonic()
        self.started = True

    def exposition(self) -> bytes:
        data: bytes = _exposition().generate_latest(self.registry)
        return data

    @property
    def content_type(self) -> str:
        return str(_exposition().CONTENT_TYPE_LATEST)

    def healthy(self) -> bool:
        return time.monotonic() - self.heartbeat < self.liveness_timeout


class HealthMetrics:
    """GPU health: state and reasons per GPU, XIDs by code, as docs/health.md says.

    There is no ``node`` label: the scrape's relabeling adds it. One of the agent's own
    would become ``exported_node``.
    """

    STATES = ("ok", "no-driver", "degraded", "failed", "unknown")

    def __init__(self, pc: Any, r: Any) -> None:
        self.state = pc.Gauge(
            "nfd_gpu_gpu_health",
            "GPU health by PCI address: 1 for its state (ok, no-driver, degraded, failed, unknown)",
            ["gpu", "state"],
            registry=r,
        )
        self.reason = pc.Gauge(
            "nfd_gpu_gpu_health_reason",
            "1 for each reason a GPU is degraded or failed (source: nvml, nvml-events, sysfs)",
            ["gpu", "reason", "source"],
            registry=r,
        )
        self.xids = pc.Counter(
            "nfd_gpu_xid_events_total",
            "NVML critical XID events the XID watcher read, by XID code",
            ["xid"],
            registry=r,
        )
        self._xid_seen: dict[str, int] = {}
        self._reasons: set[tuple[str, ...]] = set()
        self._gpus: set[str] = set()

    def observe(
        self,
        gpus: Mapping[str, tuple[str, set[tuple[str, str]]]],
        xids: Mapping[str, int],
    ) -> None:
        """Set the GPU health metrics.

        - ``gpus``: address to state and a set of reason and source pairs.
        - ``xids``: counts since start, keyed by the bounded XID label value of
          ``nfd_gpu.health.signals.xid_key``.
        """
        keys = set(gpus)
        for gone in self._gpus - keys:
            for st in self.STATES:
                self.state.remove(gone, st)
        self._gpus = keys
        now: set[tuple[str, ...]] = set()
        for addr, (state, reasons) in gpus.items():
            for st in self.STATES:
                self.state.labels(addr, st).set(1 if st == state else 0)
            now |= {(addr, r, src) for r, src in reasons}
        for old in self._reasons - now:
            self.reason.remove(*old)
        for key in now:
            self.reason.labels(*key).set(1)
        self._reasons = now
        for code, n in xids.items():
            delta = n - self._xid_seen.get(code, 0)
            if delta > 0:
                self.xids.labels(xid=code).inc(delta)
                self._xid_seen[code] = n


class MetricsServer:
    """Serve ``/metrics``, ``/healthz``, ``/readyz``, ``/startedz`` on a ``httpserve.py`` thread."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.server = httpserve.Server((host, port), self.route, metrics.http_rejected.inc)

    def route(self, path: str) -> tuple[int, str, bytes]:
        m = self.metrics
        if path == "/metrics":
            return 200, m.content_type, m.exposition()
        if path == "/healthz":
            ok = m.healthy()
            return (200, TEXT, b"ok\n") if ok else (503, TEXT, b"agent loop stalled\n")
        if path == "/readyz":
            code, body = m.readyz()
            return code, TEXT, body
        if path == "/startedz":
            return (200, TEXT, b"ok\n") if m.started else (503, TEXT, b"first pass not ended\n")
        return 404, TEXT, b"not found\n"

    @property
    def address(self) -> tuple[str, int]:
        return self.server.address

    def start(self) -> MetricsServer:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
