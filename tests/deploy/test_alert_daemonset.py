"""NfdGpuNotReady selects the DaemonSet it watches by namespace and name: in
deploy/monitoring's manifest the ones deploy/ installs (nfd-gpu in nfd-gpu), in the Helm
chart the release's own (its fullname in the release namespace). Checked with
``promtool test rules`` on kube-state-metrics series for that DaemonSet and for a
DaemonSet of the default name in another namespace: the alert fires for the right one only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import renderings as r
from tests.required_tools import need

PROMTOOL = "apt-get install prometheus"
ALERT = "NfdGpuNotReady"


def groups_of(rule: dict[str, Any]) -> list[Any]:
    assert rule["kind"] == "PrometheusRule"
    groups: list[Any] = rule["spec"]["groups"]
    return groups


def not_ready_tests(namespace: str, daemonset: str) -> dict[str, Any]:
    """promtool unit tests: ``namespace/daemonset`` has 2 of 3 pods ready for 20 minutes,
    a DaemonSet ``other/nfd-gpu`` (and ``namespace/other``) as long; then all ready."""

    def series(ns: str, ds: str, ready: str) -> list[dict[str, str]]:
        sel = f'{{namespace="{ns}",daemonset="{ds}"}}'
        return [
            {"series": f"kube_daemonset_status_number_ready{sel}", "values": ready},
            {"series": f"kube_daemonset_status_desired_number_scheduled{sel}", "values": "3x40"},
        ]

    lagging = "2x20 3x20"
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    *series(namespace, daemonset, lagging),
                    *series("other", "nfd-gpu", lagging),
                    *series(namespace, "other", lagging),
                ],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": ALERT, "exp_alerts": []},
                    {
                        "eval_time": "18m",
                        "alertname": ALERT,
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "namespace": namespace,
                                    "daemonset": daemonset,
                                },
                                "exp_annotations": {
                                    "summary": "nfd-gpu pods not ready (/readyz: the node's "
                                    "labels are not the latest scan's)"
                                },
                            }
                        ],
                    },
                    {"eval_time": "30m", "alertname": ALERT, "exp_alerts": []},
                ],
            }
        ],
    }


def promtool_test(groups: list[Any], namespace: str, daemonset: str, where: Path) -> str:
    promtool = need("promtool", PROMTOOL)
    where.mkdir(parents=True, exist_ok=True)
    (where / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    (where / "tests.yaml").write_text(yaml.safe_dump(not_ready_tests(namespace, daemonset)))
    p = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"], cwd=where, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_manifest_watches_the_daemonset_deploy_installs(tmp_path: Path) -> None:
    rule = yaml.safe_load((r.DEPLOY / "monitoring" / "prometheusrule.yaml").read_text())
    base = yaml.safe_load((r.DEPLOY / "base" / "daemonset.yaml").read_text())
    ns = yaml.safe_load((r.DEPLOY / "base" / "kustomization.yaml").read_text())["namespace"]
    assert "SUCCESS" in promtool_test(groups_of(rule), ns, base["metadata"]["name"], tmp_path)


@pytest.mark.parametrize(
    ("release", "namespace", "values", "daemonset"),
    [
        ("nfd-gpu", "nfd-gpu", [], "nfd-gpu"),
        ("gpu-labels", "gpu-ops", [], "gpu-labels-nfd-gpu"),
        ("x", "monitoring", ["--set", "fullnameOverride=gpu-agent"], "gpu-agent"),
    ],
)
def test_chart_watches_its_release_daemonset(
    release: str, namespace: str, values: list[str], daemonset: str, tmp_path: Path
) -> None:
    out = r.helm(
        "template", release, str(r.CHART), "--namespace", namespace,
        "--kube-version", r.HELM_KUBE_VERSION, "--set", "prometheusRule.enabled=true", *values,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    assert (ds["metadata"]["name"], ds["metadata"]["namespace"]) == (daemonset, namespace)
    (rule,) = [o for o in objs if o["kind"] == "PrometheusRule"]
    assert "SUCCESS" in promtool_test(groups_of(rule), namespace, daemonset, tmp_path)
