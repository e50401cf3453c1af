"""Server-side dry-run of every deploy/ rendering on the real kube-apiserver.

Every object of the Helm values matrix (``helm template``) and of every subset of the
kustomize components is sent as a server-side apply with ``dryRun=All`` to the e2e
cluster (``kube_cluster``: etcd + kube-apiserver with NFD's CRDs) after the Prometheus
Operator CRDs (tests/e2e/build-tools.sh) are installed: the API server's own validation,
defaulting and admission accept it. Only the namespace is created for real (namespaced
objects cannot be dry-run into a namespace that does not exist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy import renderings as r

Obj = dict[str, Any]
MONITORING_CRDS = [
    "podmonitors.monitoring.coreos.com",
    "servicemonitors.monitoring.coreos.com",
    "prometheusrules.monitoring.coreos.com",
]


@pytest.fixture(scope="module")
def cluster(kube_cluster: Any) -> Any:
    from tests.e2e import cluster as cluster_module

    crds = r.BIN / "monitoring-crds.yaml"
    if not crds.is_file():
        r.missing(f"{crds} not found (run: bash tests/e2e/build-tools.sh)")
    for crd in cluster_module.load_yaml_docs(crds):
        kube_cluster.apply(crd)
    kube_cluster.wait_crds(MONITORING_CRDS)
    for ns in (r.NAMESPACE, HELM_NAMESPACE):
        kube_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return kube_cluster


# The Helm renderings go into a namespace of their own: the e2e suite's agent runs from
# the kustomize DaemonSet in r.NAMESPACE, and a DaemonSet's selector is immutable (Helm's
# carries app.kubernetes.io/instance), so an apply over it is refused as it would be on a
# cluster that switches from kustomize to Helm without deleting the DaemonSet first.
HELM_NAMESPACE = "nfd-gpu-helm"


def _in_helm_namespace(objs: list[Obj]) -> list[Obj]:
    for obj in objs:
        meta = obj["metadata"]
        if meta.get("namespace") == r.NAMESPACE:
            meta["namespace"] = HELM_NAMESPACE
        if obj["kind"] == "Namespace" and meta["name"] == r.NAMESPACE:
            meta["name"] = HELM_NAMESPACE
    return objs


def _dry_run(cluster: Any, objs: list[Obj]) -> None:
    assert objs
    for obj in objs:  # the Namespace, if rendered, exists: its dry-run apply is a patch
        out = cluster.apply(obj, dry_run=True, manager="nfd-gpu-deploy-test")
        assert out["kind"] == obj["kind"] and out["metadata"]["name"] == obj["metadata"]["name"]


@pytest.mark.parametrize("case", sorted(r.HELM_MATRIX))
def test_helm_matrix_dry_run(cluster: Any, case: str, tmp_path: Path) -> None:
    _dry_run(cluster, _in_helm_namespace(r.helm_template(r.HELM_MATRIX[case][0], tmp_path)))


@pytest.mark.parametrize("overlay", sorted(p.name for p in (r.DEPLOY / "overlays").iterdir()))
def test_overlay_dry_run(cluster: Any, overlay: str) -> None:
    from tests.deploy.kustomize import build

    _dry_run(cluster, build(r.DEPLOY / "overlays" / overlay))


@pytest.mark.parametrize("subset", r.SUBSETS, ids=lambda s: "+".join(s) or "base")
def test_component_subset_dry_run(cluster: Any, subset: tuple[str, ...], tmp_path: Path) -> None:
    _dry_run(cluster, r.render_subset(subset, tmp_path / "k"))


def test_dry_run_rejects_an_invalid_object(cluster: Any, tmp_path: Path) -> None:
    """The dry-run is a real check: the API server refuses a DaemonSet it would refuse
    on apply (a container without an image)."""
    from tests.e2e.cluster import ApiError

    objs = _in_helm_namespace(r.helm_template({}, tmp_path))
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    del ds["spec"]["template"]["spec"]["containers"][0]["image"]
    with pytest.raises(ApiError) as err:
        cluster.apply(ds, dry_run=True, manager="nfd-gpu-deploy-test")
    assert err.value.status == 422, err.value
