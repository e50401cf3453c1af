"""Prometheus metrics and health endpoints (the only module importing prometheus_client).

``/metrics`` (text exposition), ``/healthz`` (200 while the agent loop is alive),
``/readyz`` (200 after the first successful publish). Served by a stdlib threaded HTTP
server on ``--metrics-address``. Each Metrics object has its own registry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nfd_gpu import __version__

log = logging.getLogger(__name__)

NVML_SOURCES = ("nvml", "replay", "stale", "procfs", "off", "none")


class Metrics:
    def __init__(self) -> None:
        import prometheus_client as _pc  # lazy

        pc: Any = _pc
        self._pc = pc
        self.registry = pc.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.build_info = pc.Gauge(
            "nfd_gpu_build_info", "nfd-gpu build information", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)
        self.scans = pc.Counter(
            "nfd_gpu_scans_total",
            "Scan passes by result (ok, warning, error)",
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
        for res in ("ok", "warning", "error"):
            self.scans.labels(result=res)
        self._vendors: set[str] = set()
        self.ready = threading.Event()
        self.heartbeat = time.monotonic()
        self.liveness_timeout = 300.0

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

    def beat(self) -> None:
        self.heartbeat = time.monotonic()

    def exposition(self) -> bytes:
        data: bytes = self._pc.generate_latest(self.registry)
        return data

    @property
    def content_type(self) -> str:
        return str(self._pc.CONTENT_TYPE_LATEST)

    def healthy(self) -> bool:
        return time.monotonic() - self.heartbeat < self.liveness_timeout


class MetricsServer:
    """``/metrics``, ``/healthz``, ``/readyz`` on a background thread."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        m = metrics

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                ctype = "text/plain; charset=utf-8"
                if path == "/metrics":
                    code, body, ctype = 200, m.exposition(), m.content_type
                elif path == "/healthz":
                    ok = m.healthy()
                    code, body = (200, b"ok\n") if ok else (503, b"agent loop stalled\n")
                elif path == "/readyz":
                    ok = m.ready.is_set()
                    code, body = (200, b"ok\n") if ok else (503, b"not published yet\n")
                else:
                    code, body = 404, b"not found\n"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
