"""``nfd-gpu inventory`` on the real kube-apiserver: 50 simulated nodes of tests/e2e/fleet.py
(mixed vendors, failed GPUs, a DRA node missing a GPU, one stale object), read with the
ClusterRole docs/inventory.md documents (bound to a ServiceAccount, its token in a
kubeconfig): the totals in every format are the fleet's, the disagreements are flagged,
and the HTML report renders in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, nfd_gpu_cmd
from tests.e2e.cluster import ApiError, Cluster
from tests.e2e.fleet import FIXTURES, Fleet
from tests.required_tools import need

NS = "inventory-e2e"
NODES = 50


def doc_rbac() -> list[dict[str, Any]]:
    """The ClusterRole and ClusterRoleBinding in docs/inventory.md's YAML block."""
    text = (REPO / "docs" / "inventory.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "docs/inventory.md has no yaml block"
    return [d for d in yaml.safe_load_all(block.group(1)) if d]


@pytest.fixture(scope="module")
def fleet(kube_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kube_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    f = Fleet.build(NODES, NS, "inv-")
    f.create(kube_cluster.request)
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "reader", "namespace": NS},
    }
    kube_cluster.apply(sa)
    for obj in doc_rbac():
        if obj["kind"] == "ClusterRoleBinding":
            obj["subjects"] = [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}]
        kube_cluster.apply(obj)
    tr = kube_cluster.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/reader/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    kubeconfig = kube_cluster.write_kubeconfig(
        tmp_path_factory.mktemp("inventory") / "reader.kubeconfig", {"token": tr["status"]["token"]}
    )
    try:
        yield f, kubeconfig
    finally:
        with contextlib.suppress(ApiError):
            f.delete(kube_cluster.request)
            kube_cluster.request("DELETE", f"/api/v1/namespaces/{NS}")


def inventory(kubeconfig: Path, *args: str) -> str:
    p = subprocess.run(
        [*nfd_gpu_cmd(), "inventory", "--kubeconfig", str(kubeconfig), "-n", NS, *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_node_status_as_created(kube_cluster: Cluster, fleet: Any) -> None:
    f, _ = fleet
    node = kube_cluster.request("GET", "/api/v1/nodes/inv-0001")
    assert node["status"]["allocatable"] == f.nodes[1]["status"]["allocatable"]


def test_json_totals_and_findings(fleet: Any) -> None:
    f, kubeconfig = fleet
    doc = json.loads(inventory(kubeconfig, "--format", "json"))
    assert doc["nodes"] == NODES - 1
    assert {(t["product"], t["health"]): t["gpus"] for t in doc["totals"]} == dict(f.totals)
    assert doc["gpus"] == sum(f.totals.values())
    assert doc["staleGpus"] == f.stale_gpus
    assert {(x["kind"], x["node"]) for x in doc["findings"]} == f.findings
    assert doc["notes"] == []  # the documented role reads everything


def test_paginated_lists_give_the_same_answer(kube_cluster: Cluster, fleet: Any) -> None:
    """7 objects per list request: the NodeFeatures, Nodes and Pods come in many pages
    (the audit log shows the continued lists), with the same answer."""
    _, kubeconfig = fleet
    whole = json.loads(inventory(kubeconfig, "--format", "json"))
    assert json.loads(inventory(kubeconfig, "--format", "json", "--chunk-size", "7")) == whole
    continued = Counter(
        e["objectRef"]["resource"]
        for e in kube_cluster.audit_events()
        if "limit=7" in e.get("requestURI", "") and "continue=" in e["requestURI"]
    )
    # 50 NodeFeatures, 49 Pods, 50+ Nodes: at least 6 continued requests each
    assert min(continued[r] for r in ("nodefeatures", "pods", "nodes")) >= 6


def test_csv_and_table_totals(fleet: Any) -> None:
    f, kubeconfig = fleet
    rows = list(csv.DictReader(io.StringIO(inventory(kubeconfig, "--format", "csv"))))
    live: Counter[tuple[str, str]] = Counter()
    stale = 0
    for r in rows:
        if r["health"] == "stale":
            stale += int(r["gpus"])
        else:
            live[(r["product"], r["health"])] += int(r["gpus"])
    assert live == f.totals and stale == f.stale_gpus
    flagged = {(k, r["node"]) for r in rows for k in r["findings"].split(";") if k}
    assert flagged == f.findings
    text = inventory(kubeconfig)
    assert f"{sum(f.totals.values())} GPUs on {NODES - 1} nodes" in text
    for product, health in f.totals:
        line = [
            ln for ln in text.split("\ntotals\n")[1].splitlines() if ln.startswith(product + " ")
        ]
        assert any(ln.split()[-2:] == [health, str(f.totals[(product, health)])] for ln in line)
    for kind, node in f.findings:
        assert any(ln.split()[:2] == [kind, node] for ln in text.splitlines())


def test_html_in_a_headless_browser(fleet: Any, tmp_path: Path) -> None:
    chromium = need("chromium", "apt-get install chromium")
    f, kubeconfig = fleet
    out = tmp_path / "inventory.html"
    assert inventory(kubeconfig, "--format", "html", "-o", str(out)) == ""
    p = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         out.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert f"{sum(f.totals.values())} GPUs on {NODES - 1} nodes" in dom
    bars: Counter[tuple[str, str]] = Counter()
    for m in re.finditer(r'data-product="([^"]*)" data-health="([^"]*)" data-gpus="(\d+)"', dom):
        bars[(m.group(1), m.group(2))] += int(m.group(3))
    assert bars == f.totals
    assert f"Disagreements ({len(f.findings)})" in dom


def test_without_dra_and_pod_rights_notes(
    kube_cluster: Cluster, fleet: Any, tmp_path: Path
) -> None:
    """A user who may list only NodeFeatures and Nodes: the inventory still answers and says
    what it did not check."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "inventory-narrow"},
        "rules": [
            {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        ],
    }
    kube_cluster.apply(role)
    kube_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "narrow", "namespace": NS},
        }
    )
    kube_cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "inventory-narrow"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "inventory-narrow",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "narrow", "namespace": NS}],
        }
    )
    tr = kube_cluster.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/narrow/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    kc = kube_cluster.write_kubeconfig(
        tmp_path / "narrow.kubeconfig", {"token": tr["status"]["token"]}
    )
    doc = json.loads(inventory(kc, "--format", "json"))
    assert any("agent Pods: not allowed" in n for n in doc["notes"])
    assert any("ResourceSlices: not allowed" in n for n in doc["notes"])
    # without Pods the stale object counts; without slices the DRA node is not allocatable
    kinds = {(x["kind"], x["node"]) for x in doc["findings"]}
    assert ("stale", f"inv-{NODES - 1:04d}") not in kinds
    assert ("not-allocatable", f"inv-{len(FIXTURES):04d}") in kinds
