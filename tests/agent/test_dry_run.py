"""``nfd-gpu run --oneshot --output nodefeature --dry-run``: the object it would write, as
YAML on stdout, with no cluster (no kubeconfig, no API server, no service account)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from nfd_gpu.config.loader import hostname_node_name
from nfd_gpu.scan import run_scan

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sysfs" / "hgx-h100"
RULES = REPO / "rules"


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    # No cluster anywhere: an empty HOME (no ~/.kube/config), no KUBECONFIG, no in-cluster env.
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "nfd_gpu.cli", "run", "--oneshot", "--no-udev", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def _crd_schema() -> dict[str, Any]:
    crds = REPO / "tests" / "data" / "nfd" / "nfd-api-crds.yaml"
    for crd in yaml.safe_load_all(crds.read_text()):
        if crd and crd["spec"]["names"]["kind"] == "NodeFeature":
            (v,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
            return dict(v["schema"]["openAPIV3Schema"])
    raise AssertionError("no NodeFeature CRD")


def test_dry_run_prints_the_nodefeature(tmp_path: Path) -> None:
    res = _run(
        tmp_path,
        "--output",
        "nodefeature",
        "--dry-run",
        "--root",
        str(FIXTURE),
        "--rules",
        str(RULES),
        env={"NODE_NAME": "gpu-node-7"},
    )
    assert res.returncode == 0, res.stderr
    (obj,) = [d for d in yaml.safe_load_all(res.stdout) if d is not None]
    jsonschema.validate(obj, _crd_schema())
    assert obj["kind"] == "NodeFeature"
    assert obj["metadata"]["name"] == "nfd-gpu-gpu-node-7"
    assert obj["metadata"]["namespace"] == "nfd-gpu"
    assert obj["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": "gpu-node-7"}
    # Only nfd-gpu's own features; the labels are the scan's (rules included).
    names = {n for kind in obj["spec"]["features"].values() for n in kind}
    assert names and all(n.startswith("gpu.") for n in names), names
    assert {"gpu.device", "gpu.node"} <= names
    scan = run_scan(FIXTURE, rules_path=RULES)
    assert {"pci.device", "kernel.loadedmodule"} <= {
        n for kind in scan.features.values() for n in kind
    }  # the scan has them (rules use them); the object does not
    assert obj["spec"]["labels"] == scan.labels
    assert len(obj["spec"]["features"]["instances"]["gpu.device"]["elements"]) == 8


def test_dry_run_node_name_from_flag_then_hostname(tmp_path: Path) -> None:
    res = _run(
        tmp_path,
        "-o",
        "nodefeature",
        "--dry-run",
        "--root",
        str(FIXTURE),
        "--node-name",
        "flag-node",
        "--namespace",
        "gpu-system",
        env={"NODE_NAME": "env-node"},
    )
    assert res.returncode == 0, res.stderr
    obj = yaml.safe_load(res.stdout)
    assert (obj["metadata"]["name"], obj["metadata"]["namespace"]) == (
        "nfd-gpu-flag-node",
        "gpu-system",
    )
    res = _run(tmp_path, "-o", "nodefeature", "--dry-run", "--root", str(FIXTURE))
    want = hostname_node_name()
    if want is None:  # a host name that is no valid object name: a clear error
        assert res.returncode == 2 and "node name" in res.stderr
    else:
        assert want == socket.gethostname().lower()
        assert res.returncode == 0, res.stderr
        assert yaml.safe_load(res.stdout)["metadata"]["name"] == f"nfd-gpu-{want}"


def test_without_dry_run_a_cluster_is_needed(tmp_path: Path) -> None:
    """The same command without --dry-run fails cleanly (so the dry run did not need one)."""
    env = {"NODE_NAME": "n", "POD_NAMESPACE": "nfd-gpu"}
    res = _run(tmp_path, "-o", "nodefeature", "--root", str(FIXTURE), env=env)
    assert res.returncode == 2
    assert "Kubernetes client configuration" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("text", ["a: [", "- 1\n- 2\n", "42\n", "clusters: 7\n"])
def test_damaged_kubeconfig_is_one_line(tmp_path: Path, text: str) -> None:
    """A kubeconfig the client cannot read (broken YAML, not a mapping, a wrong shape): with
    the nodefeature output, exit 2 and one line naming the file; with the feature file
    (which only looks for a stale NodeFeature with it), a warning and the labels written."""
    bad = tmp_path / "kubeconfig"
    bad.write_text(text)
    args = ("--node-name", "n1", "--namespace", "ns", "--kubeconfig", str(bad))
    res = _run(tmp_path, "-o", "nodefeature", *args, "--root", str(FIXTURE))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    err = [ln for ln in res.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and str(bad) in err[0], res.stderr
    assert "cannot load Kubernetes client configuration" in err[0]
    fdir = tmp_path / "features.d"
    res = _run(tmp_path, "-o", "featurefile", "--features-dir", str(fdir), *args,
               "--root", str(FIXTURE))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert f"not checked: {bad}: cannot load Kubernetes client configuration" in res.stderr
    assert (fdir / "nfd-gpu").is_file()


def test_dry_run_feature_file_writes_nothing(tmp_path: Path) -> None:
    fdir = tmp_path / "features.d"
    res = _run(
        tmp_path,
        "-o",
        "featurefile",
        "--dry-run",
        "--raw-features",
        "--features-dir",
        str(fdir),
        "--root",
        str(FIXTURE),
    )
    assert res.returncode == 0, res.stderr
    assert not fdir.exists()
    lines = res.stdout.splitlines()
    assert lines[0] == f"# would write {fdir}/nfd-gpu"
    assert "gpu.feature.node.kubernetes.io/count=8" in lines
    raw = [ln for ln in lines if "=" in ln and not ln.startswith(("#", "gpu.feature."))]
    assert raw and all(ln.startswith("gpu.") for ln in raw), raw
