"""Fixtures for the e2e suite: a real control plane and real NFD, as subprocesses.

``kube_cluster`` (session) is a running etcd + kube-apiserver with NFD's CRDs installed;
other tests may use it (``kube_cluster.request(...)``, ``kube_cluster.admin_kubeconfig``).
``nfd_master`` (session) is NFD's nfd-master watching that server. Both need the
binaries from ``bash tests/e2e/build.sh``: without them the tests are skipped locally
and FAIL in CI (``CI`` set, e.g. ``CI=true``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.deploy import kustomize
from tests.e2e.cluster import BIN, ApiError, Cluster, Obj, free_port, load_yaml_docs

NFD_NAMESPACE = "node-feature-discovery"
NS = "nfd-gpu"  # the agent's namespace in deploy/
MASTER_NODE = "e2e-control-plane"
NFD_CRDS = [
    "nodefeatures.nfd.k8s-sigs.io",
    "nodefeaturerules.nfd.k8s-sigs.io",
    "nodefeaturegroups.nfd.k8s-sigs.io",
]


def _require_components() -> None:
    from tests.e2e.cluster import missing_components

    missing = missing_components()
    if not missing:
        return
    msg = f"e2e components missing (run: bash tests/e2e/build.sh): {', '.join(missing)}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """etcd + kube-apiserver (RBAC on, per-run PKI, audit log) with NFD's CRDs."""
    _require_components()
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        for crd in load_yaml_docs(BIN / "nfd-api-crds.yaml"):
            cluster.apply(crd)
        cluster.wait_crds(NFD_CRDS)
        cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NFD_NAMESPACE}}
        )
        yield cluster
    finally:
        cluster.stop()


class Proc:
    """A subprocess with its combined output in a log file."""

    def __init__(self, args: list[str], log: Path, **kw: Any) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, **kw)

    def log(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="session")
def nfd_master(kube_cluster: Cluster) -> Iterator[Proc]:
    """NFD's nfd-master (admin credentials, default config, ``-enable-taints``) labelling
    and tainting the test nodes."""
    master = start_nfd_master(kube_cluster)
    try:
        yield master
    finally:
        master.stop()


def start_nfd_master(kube_cluster: Cluster) -> Proc:
    """nfd-master for ``kube_cluster`` (NFD's namespace must exist), up and healthy."""
    d = kube_cluster.workdir
    (d / "nfd-master.conf").write_text("")
    # nfd-master patches the node it runs on (NODE_NAME): give it one of its own.
    kube_cluster.apply(node_object(MASTER_NODE))
    port = free_port()
    master = Proc(
        [
            str(BIN / "nfd-master"),
            f"-kubeconfig={kube_cluster.admin_kubeconfig}",
            f"-config={d / 'nfd-master.conf'}",
            f"-port={port}",
            "-enable-taints",  # the taints of rules/gpu-health.yaml (docs/install.md)
        ],
        d / "nfd-master.log",
        env={**os.environ, "KUBERNETES_NAMESPACE": NFD_NAMESPACE, "NODE_NAME": MASTER_NODE},
    )
    try:
        # up once its informers have synced and its HTTP server answers /healthz
        def healthy() -> bool:
            if master.proc.poll() is not None:
                raise RuntimeError(f"nfd-master exited {master.proc.returncode}:\n{master.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        wait_for(healthy, 30, master.log)
    except BaseException:
        master.stop()
        raise
    return master


def wait_for(cond: Callable[[], Any], timeout: float, why: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s\n{why()}")
        time.sleep(0.1)


def node_object(name: str) -> Obj:
    """A Node as a kubelet registers it (its label and annotation; nfd-master's JSON
    patches add under existing ``metadata.labels``/``annotations`` maps)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
    }


@pytest.fixture
def make_node(kube_cluster: Cluster) -> Iterator[Callable[[str], Obj]]:
    """Create Node objects (no kubelet: just the API object); deleted afterwards."""
    made: list[str] = []

    def make(name: str) -> Obj:
        node: Obj = kube_cluster.request("POST", "/api/v1/nodes", node_object(name))
        made.append(name)
        return node

    yield make
    for name in made:
        with contextlib.suppress(ApiError):
            kube_cluster.request("DELETE", f"/api/v1/nodes/{name}")


# -- the agent's ServiceAccount, bound to exactly the shipped Role ---------------------


def rendered(overlay: str) -> list[Obj]:
    return kustomize.build(REPO / "deploy" / "overlays" / overlay)


@pytest.fixture(scope="session")
def agent_sa(kube_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The nodefeature-api overlay's Namespace, ServiceAccount, Role and RoleBinding applied
    for real; a token for the ServiceAccount from the TokenRequest API; its kubeconfig."""
    objs = rendered("nodefeature-api")
    rbac = [o for o in objs if o["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")]
    assert sorted(o["kind"] for o in rbac) == ["Namespace", "Role", "RoleBinding", "ServiceAccount"]
    for obj in rbac:
        kube_cluster.apply(obj)
    role = next(o for o in rbac if o["kind"] == "Role")
    with (REPO / "deploy" / "base" / "role.yaml").open() as f:
        assert role["rules"] == yaml.safe_load(f)["rules"]
    tr = kube_cluster.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/nfd-gpu/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token = tr["status"]["token"]
    kubeconfig = kube_cluster.write_kubeconfig(
        tmp_path_factory.mktemp("sa") / "nfd-gpu.kubeconfig", {"token": token}
    )
    return {"token": token, "kubeconfig": kubeconfig, "role": role, "objects": objs}
