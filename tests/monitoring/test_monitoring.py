"""deploy/monitoring: the PrometheusRule (promtool check + unit tests) and the Grafana
dashboard, both checked against the metrics a running agent really exports."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, fixture_root, nfd_gpu_cmd
from tests.required_tools import need

MONITORING = REPO / "deploy" / "monitoring"
RULE = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
# Alerts may use kube-state-metrics (docs/metrics-alerts.md); everything else is ours.
EXTERNAL = {"kube_daemonset_status_number_ready", "kube_daemonset_status_desired_number_scheduled"}
METRIC = re.compile(r"\b(nfd_gpu_[a-z0-9_]+|kube_[a-z0-9_]+)\b")
PROMTOOL = "apt-get install prometheus"


def _rule_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(RULE.read_text())
    return doc


def _alerts() -> list[dict[str, Any]]:
    return [r for g in _rule_doc()["spec"]["groups"] for r in g["rules"]]


def _panel_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """Metric names in a real /metrics scrape of ``nfd-gpu run`` after its first publish."""
    tmp = tmp_path_factory.mktemp("agent")
    cmd = [*nfd_gpu_cmd(), "run", "--root", str(fixture_root("hgx-h100")),
           "--output", "featurefile", "--features-dir", str(tmp / "features.d"),
           "--rules", str(REPO / "rules"), "--metrics-address", "127.0.0.1:0",
           "--no-udev", "--interval", "600"]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 60
        log = []
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            log.append(line)
            m = re.search(r"metrics listening on (http://[0-9.:]+)/metrics", line)
            url = m.group(1) if m else None
        assert url, "".join(log)
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    names = {
        re.split(r"[{ ]", line, maxsplit=1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert "nfd_gpu_build_info" in names and "nfd_gpu_gpus" in names, text
    yield names


def test_prometheusrule_manifest() -> None:
    doc = _rule_doc()
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["kind"] == "PrometheusRule"
    assert doc["metadata"]["name"] == "nfd-gpu"
    alerts = _alerts()
    assert len(alerts) >= 5
    for rule in alerts:
        assert rule["alert"].startswith("NfdGpu")
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"]


def test_promtool_check_rules(tmp_path: Path) -> None:
    promtool = need("promtool", PROMTOOL)
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": _rule_doc()["spec"]["groups"]}))
    p = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in p.stdout


def test_promtool_alert_unit_tests(tmp_path: Path) -> None:
    """The alerts fire (and only then) on series that should trigger them."""
    promtool = need("promtool", PROMTOOL)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_doc()["spec"]["groups"]}))
    shutil.copy(REPO / "tests" / "monitoring" / "alerts.test.yaml", tmp_path)
    p = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_alert_expressions_name_exported_metrics(scrape: set[str]) -> None:
    for rule in _alerts():
        names = set(METRIC.findall(rule["expr"]))
        assert names, rule["alert"]
        missing = names - scrape - EXTERNAL
        assert not missing, (rule["alert"], missing)


def test_dashboard_panels_name_exported_metrics(scrape: set[str]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "nfd-gpu" and dash["panels"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["targets"], p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
    for title, expr in _panel_exprs():
        names = set(METRIC.findall(expr))
        assert names, title
        assert not (names - scrape), (title, names - scrape)
    # Every metric family the agent exports is on the dashboard.
    used = {n for _, e in _panel_exprs() for n in METRIC.findall(e)}
    families = {n for n in scrape if n.startswith("nfd_gpu_") and not n.endswith("_created")}
    unused = {f for f in families if not any(u == f or f.startswith(u) for u in used)}
    assert not unused, unused


def test_dashboard_queries_parse(tmp_path: Path) -> None:
    """Every panel query is valid PromQL: promtool checks them as recording rules (Grafana's
    $__rate_interval and template variables replaced by plain values)."""
    promtool = need("promtool", PROMTOOL)
    rules = []
    for i, (_, expr) in enumerate(_panel_exprs()):
        plain = expr.replace("$__rate_interval", "5m").replace("$namespace", ".*")
        rules.append({"record": f"nfd_gpu:dashboard_panel_{i}", "expr": plain})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    p = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_alerts_doc_points_at_the_manifest() -> None:
    doc = (REPO / "docs" / "metrics-alerts.md").read_text()
    assert "deploy/monitoring/prometheusrule.yaml" in doc
    assert "deploy/monitoring/grafana-dashboard.json" in doc
    assert "kind: PrometheusRule" not in doc  # one copy only: the manifest
    for rule in _alerts():
        assert rule["alert"] in doc, rule["alert"]


NODE_RELABELING = {
    "sourceLabels": ["__meta_kubernetes_pod_node_name"],
    "targetLabel": "node",
    "action": "replace",
}


def test_podmonitor_puts_the_node_on_every_series() -> None:
    """The kustomize PodMonitor relabels the pod's node name to ``node`` on every endpoint
    (the Helm chart's PodMonitor and ServiceMonitor: tests/deploy/test_helm.py)."""
    pm = yaml.safe_load((REPO / "deploy/components/monitoring/podmonitor.yaml").read_text())
    for ep in pm["spec"]["podMetricsEndpoints"]:
        assert NODE_RELABELING in ep["relabelings"], ep


def test_alerts_and_panels_key_on_node_not_pod() -> None:
    """A pod restart (the reboot after an XID 79) changes ``pod``, not ``node``: every
    aggregation groups by node, and no alert names the pod it cannot keep."""
    by = re.compile(r"\bby \(([^)]*)\)")
    exprs = [(r["alert"], r["expr"]) for r in _alerts() if r["alert"] != "NfdGpuNotReady"]
    for name, expr in exprs:
        groups = by.findall(expr)
        assert groups, name
        for g in groups:
            keys = {k.strip() for k in g.split(",")}
            assert "node" in keys and "pod" not in keys, (name, g)
    for rule in _alerts():
        assert "$labels.pod" not in str(rule["annotations"]), rule["alert"]
    for title, expr in _panel_exprs():
        for g in by.findall(expr):
            assert "pod" not in {k.strip() for k in g.split(",")}, (title, g)
    dash = json.loads(DASHBOARD.read_text())
    legends = [t.get("legendFormat", "") for p in dash["panels"] for t in p["targets"]]
    assert not [x for x in legends if "{{pod}}" in x], legends
