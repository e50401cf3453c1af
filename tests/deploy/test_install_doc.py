"""docs/install.md's commands for this repository's manifests, run as far as possible
without a cluster: each ``helm install`` is run as ``helm template`` with the same
arguments (and its objects validated), each ``kubectl apply -k deploy/...`` directory
renders, the example kustomizations (components; an env patch) render with the real
kustomize, and the components table names every component. (The objects then go to a
real API server in tests/e2e/test_deploy_dry_run.py; tests/e2e/test_install_doc.py runs
the doc's commands themselves, from an empty cluster to labels.)"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from tests.deploy import renderings as r
from tests.deploy.kustomize import build
from tests.deploy.test_manifests import validate

INSTALL = (r.REPO / "docs" / "install.md").read_text()
REMOTE = "https://github.com/nfd-gpu/nfd-gpu//"
HELM_INSTALLS = [
    line.strip()
    for line in INSTALL.splitlines()
    if line.startswith("helm install nfd-gpu deploy/helm/nfd-gpu")
]


def test_doc_has_both_paths() -> None:
    assert len(HELM_INSTALLS) >= 6
    assert "kubectl apply -k deploy/overlays/nodefeature-api" in INSTALL
    assert (
        "oci://registry.k8s.io/nfd/charts/node-feature-discovery" in INSTALL
        and "node-feature-discovery/deployment/overlays/default" in INSTALL
    )


@pytest.mark.parametrize("line", HELM_INSTALLS)
def test_helm_install_line_renders(line: str) -> None:
    args = shlex.split(line)
    assert args[:2] == ["helm", "install"]
    out = r.helm("template", *args[2:], "--kube-version", r.HELM_KUBE_VERSION)
    assert out.returncode == 0, out.stderr
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    for o in objs:
        assert o["metadata"].get("namespace", "nfd-gpu") == "nfd-gpu"
        validate(o, objs)
    if "--set" in args:  # each choice changes something
        base = r.helm("template", *args[2:4], "--namespace", "nfd-gpu").stdout
        assert out.stdout != base


def test_kubectl_apply_dirs_render() -> None:
    dirs = set(re.findall(r"kubectl (?:apply|delete) -k (deploy/[\w/-]+)", INSTALL))
    assert dirs
    for d in dirs:
        assert build(r.REPO / d)


def local(url: str, where: Path) -> str:
    """This repository's remote kustomize URL as a path to the checkout, from ``where``."""
    assert url.startswith(REMOTE) and url.endswith("?ref=main"), url
    return os.path.relpath(r.REPO / url[len(REMOTE) : -len("?ref=main")], where)


def test_components_example(tmp_path: Path) -> None:
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", INSTALL, re.S) if "components:" in b]
    k = yaml.safe_load(block)
    where = tmp_path / "mine"
    where.mkdir()

    k["resources"] = [local(u, where) for u in k["resources"]]
    k["components"] = [local(u, where) for u in k["components"]]
    (where / "kustomization.yaml").write_text(yaml.safe_dump(k))
    ours = build(where)
    assert {o["kind"] for o in ours} >= {"DaemonSet", "PodMonitor"}
    assert r.normalized(r.kustomize_real(where)) == r.normalized(ours)


def test_settings_patch_example(tmp_path: Path) -> None:
    """The doc's own-overlay example (image tag, an env patch) renders with the real
    kustomize, its remote base mapped to this checkout, and changes what it says."""
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", INSTALL, re.S) if "patches:" in b]
    k = yaml.safe_load(block)
    k["resources"] = [local(u, tmp_path) for u in k["resources"]]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(k))
    (ds,) = [o for o in r.kustomize_real(tmp_path) if o["kind"] == "DaemonSet"]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "ghcr.io/nfd-gpu/nfd-gpu:v0.1.0"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NFD_GPU_INTERVAL"] == "300" and env["NFD_GPU_OUTPUTS"] == "nodefeature"


def test_components_table_complete() -> None:
    for c in r.COMPONENTS:
        assert f"| `{c}` |" in INSTALL, c
