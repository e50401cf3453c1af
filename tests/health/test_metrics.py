"""Health metrics (docs/metrics.md): per GPU state and reasons, XIDs by code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import prometheus_client

from nfd_gpu.agent.health import AgentHealth
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config import loader as config
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root


def _text(m: Metrics) -> str:
    return prometheus_client.generate_latest(m.registry).decode()


def test_health_metrics_follow_the_gpus() -> None:
    m = Metrics()
    root = fixture_root("h100-remap-pending")
    h = AgentHealth(config.load(env={}, flags={"root": str(root), "outputs": "hook"}))
    h.observe(m, run_scan(root))
    text = _text(m)
    assert 'nfd_gpu_gpu_health{gpu="0000:2a:00.0",state="failed"} 1.0' in text
    assert 'nfd_gpu_gpu_health{gpu="0000:18:00.0",state="ok"} 1.0' in text
    assert (
        'nfd_gpu_gpu_health_reason{gpu="0000:2a:00.0",reason="row-remap-pending",source="nvml"} 1.0'
    ) in text
    h.observe(m, run_scan(fixture_root("h100-xid-79")))  # same addresses, all clear
    text = _text(m)
    assert "nfd_gpu_gpu_health_reason{" not in text  # the reason is gone with its fault
    assert 'gpu="0000:2a:00.0",state="ok"} 1.0' in text


def test_xid_counter_by_code() -> None:
    m = Metrics()
    m.health.observe({}, {"48": 1, "13": 2})
    m.health.observe({}, {"48": 3, "13": 2})  # counts since the watcher started
    text = _text(m)
    assert 'nfd_gpu_xid_events_total{xid="48"} 3.0' in text
    assert 'nfd_gpu_xid_events_total{xid="13"} 2.0' in text


def test_no_series_carries_a_node_label_of_its_own() -> None:
    """The scrape's relabeling puts ``node`` on every series (docs/metrics-alerts.md); a
    ``node`` label exported by the agent would arrive as ``exported_node`` beside it."""
    m = Metrics()
    root = fixture_root("h100-remap-pending")
    h = AgentHealth(config.load(env={}, flags={"root": str(root), "outputs": "hook"}))
    h.observe(m, run_scan(root))
    m.health.observe({"0000:01:00.0": ("failed", {("xid-79", "nvml")})}, {"79": 1})
    families = list(m.registry.collect())
    assert any(f.name == "nfd_gpu_gpu_health" and f.samples for f in families)
    exported = {f.name for f in families for s in f.samples if "node" in s.labels}
    assert exported == set()


def test_xid_series_are_bounded() -> None:
    """10,000 distinct XID codes: one series per code NVIDIA names, one ``other`` for the
    rest (on main: 10,000 series, /metrics 2 MB)."""
    from nfd_gpu.discovery.nvidia import replay
    from nfd_gpu.discovery.nvidia.events import XidWatcher
    from nfd_gpu.health.signals import KNOWN_XIDS

    root = fixture_root("h100-xid-79")
    m = Metrics()
    h = AgentHealth(config.load(env={}, flags={"root": str(root), "outputs": "hook"}))
    w = XidWatcher(replay.load(str(root / "nvml.json")))
    w.counts.update({code: 1 for code in range(10_000)})
    h.watcher = w
    h.observe(m, run_scan(root))
    text = _text(m)
    series = [ln for ln in text.splitlines() if ln.startswith("nfd_gpu_xid_events_total{")]
    assert len(series) == len(KNOWN_XIDS) + 1
    assert f'nfd_gpu_xid_events_total{{xid="other"}} {10_000 - len(KNOWN_XIDS)}.0' in text
    assert 'nfd_gpu_xid_events_total{xid="79"} 1.0' in text
    assert len(text) < 20_000


# A fresh interpreter: the agent's metrics made and one scrape served, what was imported
# before the scrape, and prometheus_client whole for code that imports it afterwards.
LIGHT_CHILD = """
import json, sys
from nfd_gpu.agent.metrics import Metrics
m = Metrics()
m.scans.labels(result="ok").inc()
before = sorted(n for n in sys.modules if n.startswith(("prometheus_client", "urllib.request",
                                                        "wsgiref", "http.server")))
text = m.exposition().decode()
import prometheus_client
print(json.dumps({"before": before, "scans": 'nfd_gpu_scans_total{result="ok"} 1.0' in text,
                  "type": m.content_type, "later": prometheus_client.generate_latest.__name__,
                  "same": prometheus_client.Counter is type(m.scans)}))
"""


def test_the_metrics_import_the_exposition_on_the_first_scrape() -> None:
    """The first publish needs the metric types only: not the package's HTTP server, WSGI
    and ``urllib.request``, which its ``__init__`` imports (nfd_gpu/lazypkg.py)."""
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", LIGHT_CHILD], cwd=repo, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    before = got["before"]
    assert "prometheus_client.metrics" in before
    assert [n for n in before if "exposition" in n or not n.startswith("prometheus_")] == []
    assert "prometheus_client.process_collector" not in before
    assert got["scans"] and got["type"].startswith("text/plain")
    assert got["later"] == "generate_latest" and got["same"]
