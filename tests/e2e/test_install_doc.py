"""docs/install.md followed as a newcomer would, from an empty cluster to labels, once with
Helm and once with kustomize: a fresh etcd + kube-apiserver of tests/e2e per path (nothing
installed, not even NFD's CRDs), the real ``kubectl`` (k8s.io/kubernetes, tests/e2e/build.sh)
and ``helm`` (tests/e2e/build-tools.sh). Every command comes from the doc's ``sh`` blocks,
parsed here so the doc and the test cannot drift, and runs verbatim in bash from the
repository root, except for remote references a sealed CI machine cannot reach, each
replaced by a local copy of the SAME thing:

- NFD's chart ``oci://registry.k8s.io/nfd/charts/node-feature-discovery`` and its kustomize
  overlay on GitHub (``?ref=v0.19.0``): NFD's own ``deployment/`` directory of the version
  the doc names, from the Go module tests/e2e/build.sh builds nfd-master and nfd-worker
  from (``bin/nfd-deployment``, its version in ``VERSION``, checked against the doc); the
  chart is packaged with ``helm package --version`` the doc's chart version, as NFD's
  release does (the chart in NFD's tree carries a placeholder version);
- this repository's own GitHub URL (``github.com/nfd-gpu/nfd-gpu``): the checkout.

No kubelet, scheduler or kube-controller-manager runs here, so what they would do is done
by the test and named where it happens:

- nfd-master runs as a process with admin credentials (the Deployment NFD's install
  creates cannot start without a kubelet); nfd-worker's pci source runs one pass for the
  GPU node, reading a fixture's sysfs, as its DaemonSet pod would;
- the nfd-gpu pod on the GPU node is created from the installed DaemonSet's template (as
  the DaemonSet controller and the scheduler would) and the agent runs as that pod would:
  the template's arguments (``--root`` pointing at the fixture instead of ``/host``,
  ``--oneshot``), the pod's downward-API environment, a token of the installed
  ServiceAccount bound to the pod (what the kubelet mounts), so the installed Role and
  admission policy apply;
- ``kubectl rollout status`` reads the DaemonSet status, which only the DaemonSet
  controller writes: the test first checks that the doc's command waits while no status
  is written, then writes the status subresource as that controller would once the
  kubelet reports the one pod ready (observedGeneration, one scheduled/updated/ready pod).

After the uninstall command the NodeFeature objects are left to kube-controller-manager's
garbage collector (owner references), which does not run here: not checked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, fixture_root, nfd_gpu_cmd
from tests.deploy.renderings import tool
from tests.e2e.cluster import BIN, ApiError, Cluster, Obj, container_env, daemonset_pod, free_port
from tests.e2e.conftest import (
    NFD_CRDS,
    NFD_NAMESPACE,
    Proc,
    _require_components,
    node_object,
    start_nfd_master,
    wait_for,
)
from tests.e2e.test_admission_policy import bound_token
from tests.e2e.test_cluster import agent_env, run_nfd_worker

INSTALL = (REPO / "docs" / "install.md").read_text()
NFD_DIR = BIN / "nfd-deployment"
NFD_OCI = "oci://registry.k8s.io/nfd/charts/node-feature-discovery"
NFD_GITHUB = "https://github.com/kubernetes-sigs/node-feature-discovery/deployment/"
OURS = "https://github.com/nfd-gpu/nfd-gpu//"
NS = "nfd-gpu"
GPU_NODE = "install-gpu-node"
CPU_NODE = "install-cpu-node"
FIXTURE = "hgx-h100"
FAMILY = "gpu.feature.node.kubernetes.io/family"
COUNT = "gpu.feature.node.kubernetes.io/count"


def sh_blocks(section: str) -> list[list[str]]:
    """The commands (comment lines dropped) of each ``sh`` block under ``## <section>``."""
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", INSTALL, re.S | re.M)
    assert m, f"docs/install.md has no section {section!r}"
    blocks = re.findall(r"```sh\n(.*?)```", m.group(1), re.S)
    return [[ln for ln in b.splitlines() if ln.strip() and not ln.startswith("#")] for b in blocks]


def one(lines: list[str], prefix: str) -> str:
    (line,) = [ln for ln in lines if ln.startswith(prefix)]
    return line


@dataclass
class Doc:
    """The doc's commands for one path."""

    check_nfd: list[str]  # step 1: is NFD there?
    install_nfd: str
    install_gpu: list[str]  # step 2a or 2b
    checks: list[str]  # step 3
    uninstall: str


def doc_commands(path: str) -> Doc:
    (check_nfd, nfd) = sh_blocks("1. NFD")
    (checks,) = sh_blocks("3. Check")
    ((uninstall,),) = sh_blocks("Uninstall")
    kustomize_uninstall, helm_uninstall = uninstall.split("# or:")
    if path == "helm":
        install_nfd = one(nfd, "helm install nfd ")
        install_gpu = sh_blocks("2a. nfd-gpu with Helm")[0]
        undo = helm_uninstall
    else:
        install_nfd = one(nfd, "kubectl apply -k ")
        local, remote = sh_blocks("2b. nfd-gpu with kustomize")
        install_gpu = [*local, *remote]  # the second (remote) one must change nothing
        undo = kustomize_uninstall
    return Doc(check_nfd, install_nfd, install_gpu, checks, undo.strip())


def nfd_version() -> str:
    return (NFD_DIR / "VERSION").read_text().strip()


class Shell:
    """bash in the repository root with the built kubectl and helm first on PATH, the
    cluster's admin kubeconfig, and Helm's state in a directory of its own."""

    def __init__(self, cluster: Cluster, home: Path) -> None:
        tool("helm")  # fails (CI) or skips when helm is not built
        self.cluster = cluster
        self.home = home
        self.env = {
            **agent_env(),
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "KUBECONFIG": str(cluster.admin_kubeconfig),
            "HELM_CONFIG_HOME": str(home / "helm-config"),
            "HELM_CACHE_HOME": str(home / "helm-cache"),
            "HELM_DATA_HOME": str(home / "helm-data"),
        }
        self.ran: list[str] = []

    def start(self, cmd: str) -> subprocess.Popen[str]:
        self.ran.append(cmd)
        return subprocess.Popen(
            ["bash", "-c", f"set -o pipefail; {self.localize(cmd)}"],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, cmd: str, *, ok: bool | None = True, timeout: float = 120) -> str:
        """Run ``cmd``; ``ok``: it must succeed (True), fail (False), either (None)."""
        p = self.start(cmd)
        out, _ = p.communicate(timeout=timeout)
        if ok is not None:
            assert (p.returncode == 0) == ok, (
                f"{self.localize(cmd)}: rc {p.returncode}\n{out}\n{self.cluster.log_tail()}"
            )
        return out

    def localize(self, cmd: str) -> str:
        """``cmd`` with its remote references replaced by local copies of the same version."""
        if NFD_OCI in cmd:
            version = shlex.split(cmd)[shlex.split(cmd).index("--version") + 1]
            assert "v" + version == nfd_version(), (version, nfd_version())
            return cmd.replace(NFD_OCI, str(self.nfd_chart(version)))
        m = re.search(rf'"{re.escape(NFD_GITHUB)}([\w/-]+)\?ref=([\w.]+)"', cmd)
        if m:
            assert m.group(2) == nfd_version(), (m.group(2), nfd_version())
            return cmd.replace(m.group(0), shlex.quote(str(NFD_DIR / m.group(1))))
        m = re.search(rf"'{re.escape(OURS)}([\w/-]+)\?ref=main'", cmd)
        if m:
            return cmd.replace(m.group(0), m.group(1))
        assert "://" not in cmd, f"a remote reference this test cannot map: {cmd}"
        return cmd

    def nfd_chart(self, version: str) -> Path:
        out = self.run(
            f"helm package --version {version} --app-version v{version}"
            f" {shlex.quote(str(NFD_DIR / 'helm' / 'node-feature-discovery'))}"
            f" -d {shlex.quote(str(self.home))}"
        )
        chart = self.home / f"node-feature-discovery-{version}.tgz"
        assert chart.exists(), out
        return chart


@pytest.fixture
def empty_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh etcd + kube-apiserver with nothing installed."""
    _require_components()
    cluster = Cluster(tmp_path / "cluster")
    cluster.workdir.mkdir()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def label_gpu_node_like_nfd(cluster: Cluster, work: Path) -> None:
    """What NFD's running pods would do for a GPU node: nfd-worker's pci source over the
    fixture's sysfs publishes its NodeFeature, nfd-master labels the Node."""
    work.mkdir()
    (work / "host-sys").symlink_to(fixture_root(FIXTURE) / "sys")
    worker = run_nfd_worker(cluster, GPU_NODE, work, "pci", label_sources="pci")
    assert worker.returncode == 0, worker.stderr[-3000:]


def run_agent_as_pod(cluster: Cluster, work: Path) -> Obj:
    """Create the DaemonSet's pod on the GPU node from its own template and run its
    agent once as that pod would; returns the pod."""
    ds = cluster.request("GET", f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu")
    template = ds["spec"]["template"]
    spec = {**template["spec"], "nodeName": GPU_NODE}
    pod: Obj = cluster.request(
        "POST",
        f"/api/v1/namespaces/{NS}/pods",
        daemonset_pod(ds, spec, template["metadata"]["labels"]),
    )
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "nfd-gpu"]
    args = [
        {"--root": f"--root={fixture_root(FIXTURE)}", "--rules": f"--rules={REPO / 'rules'}"}.get(
            a.split("=")[0], a
        )
        for a in container["args"]
        if not a.startswith("--metrics-address")
    ]
    assert args[0].startswith("--root=") and any(a.startswith("--rules=") for a in args), args
    env = container_env(pod, container)
    token = bound_token(cluster, pod, NS)
    kubeconfig = cluster.write_kubeconfig(work / "pod.kubeconfig", {"token": token})
    log = work / "agent.log"
    # The image's entrypoint is `nfd-gpu run` (image/build.sh, Dockerfile).
    agent = Proc(
        [*nfd_gpu_cmd(), "run", *args, "--oneshot", "--no-udev", "--kubeconfig", str(kubeconfig),
         f"--metrics-address=127.0.0.1:{free_port()}"],
        log,
        env={**agent_env(), **env},
    )  # fmt: skip
    rc = agent.proc.wait(60)
    agent.stop()
    assert rc == 0, agent.log()
    return pod


def write_daemonset_status(cluster: Cluster) -> None:
    """The status the DaemonSet controller writes once its one pod (on the one node that
    matches the DaemonSet's node affinity) is ready."""
    path = f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu"
    ds = cluster.request("GET", path)
    ds["status"] = {
        "observedGeneration": ds["metadata"]["generation"],
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "updatedNumberScheduled": 1,
        "numberReady": 1,
        "numberAvailable": 1,
        "numberMisscheduled": 0,
    }
    cluster.request("PUT", path + "/status", ds)


def applied(out: str) -> set[str]:
    """The ``kind/name`` of each object in ``kubectl apply``'s output."""
    return {ln.split()[0] for ln in out.splitlines() if ln.strip()}


def gpu_row(sh: Shell, cmd: str) -> list[str]:
    """The GPU node's row of the doc's ``kubectl get nodes -L ...``."""
    out = sh.run(cmd)
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:]}
    assert CPU_NODE in rows, out
    return rows.get(GPU_NODE, [])


@pytest.mark.parametrize("path", ["helm", "kustomize"])
def test_install_doc_from_empty_cluster_to_labels(
    path: str, empty_cluster: Cluster, tmp_path: Path
) -> None:
    c = empty_cluster
    doc = doc_commands(path)
    sh = Shell(c, tmp_path)
    crd_check, pci_check = doc.check_nfd
    assert crd_check.startswith("kubectl get crd ") and "grep -c" in pci_check

    # 1. Without NFD: the doc's check says so; install NFD with the doc's command.
    assert "NotFound" in sh.run(crd_check, ok=False)
    sh.run(doc.install_nfd)
    c.wait_crds(NFD_CRDS)
    sh.run(crd_check)
    ns = c.request("GET", f"/api/v1/namespaces/{NFD_NAMESPACE}")
    assert ns["status"]["phase"] == "Active"
    c.request("POST", "/api/v1/nodes", node_object(GPU_NODE))
    c.request("POST", "/api/v1/nodes", node_object(CPU_NODE))
    master = start_nfd_master(c)
    try:
        assert sh.run(pci_check, ok=False).strip() == "0"  # grep -c: no match, exit 1
        label_gpu_node_like_nfd(c, tmp_path / "nfd-worker")
        wait_for(lambda: sh.run(pci_check, ok=None).strip() != "0", 30, master.log)

        # 2. nfd-gpu with the path's commands.
        outs = [sh.run(cmd) for cmd in doc.install_gpu]
        if path == "kustomize":  # the remote form applies the same objects: none created
            assert applied(outs[-1]) == applied(outs[0]) and "created" not in outs[-1], outs
        ds = c.request("GET", f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu")
        affinity = json.dumps(ds["spec"]["template"]["spec"]["affinity"])
        gpu_labels = c.request("GET", f"/api/v1/nodes/{GPU_NODE}")["metadata"]["labels"]
        pci = [k for k in gpu_labels if k.startswith("feature.node.kubernetes.io/pci-")]
        assert any(f'"{k}"' in affinity for k in pci), (pci, affinity)  # the GPU node matches

        # 3. Check: rollout status waits until the DaemonSet's pod is ready.
        rollout, get_nf, get_nodes = doc.checks
        assert rollout.startswith("kubectl -n nfd-gpu rollout status ds/nfd-gpu")
        assert "Waiting for daemon set" in sh.run(f"{rollout} --timeout=3s", ok=False)
        run_agent_as_pod(c, tmp_path)
        write_daemonset_status(c)
        assert 'daemon set "nfd-gpu" successfully rolled out' in sh.run(rollout)
        assert f"nfd-gpu-{GPU_NODE}" in sh.run(get_nf)
        nf = c.request(
            "GET", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-{GPU_NODE}"
        )
        family, count = nf["spec"]["labels"][FAMILY], nf["spec"]["labels"][COUNT]
        # nfd-master merges the agent's NodeFeature into the Node's labels (asynchronously)
        row = wait_for(lambda: (r := gpu_row(sh, get_nodes)) and family in r and r, 30, master.log)
        assert row[-2:] == [family, count], row
        assert gpu_row(sh, get_nodes) and len(sh.run(get_nodes).splitlines()) == 4  # 3 nodes
    finally:
        master.stop()

    # Uninstall with the doc's command: the agent's objects go.
    uninstall = sh.start(doc.uninstall)
    if path == "kustomize":  # it deletes the Namespace and waits for it to go
        act_as_namespace_controller(c)
    out, _ = uninstall.communicate(timeout=120)
    assert uninstall.returncode == 0, out
    with pytest.raises(ApiError) as e:
        c.request("GET", f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu")
    assert e.value.status == 404
    assert set(sh.ran) >= {doc.install_nfd, *doc.install_gpu, *doc.checks, doc.uninstall}


def act_as_namespace_controller(cluster: Cluster) -> None:
    """What kube-controller-manager's namespace controller (and the kubelet, for the pod)
    do once the Namespace is marked for deletion: delete what is left in it, then remove
    the ``kubernetes`` finalizer."""
    path = f"/api/v1/namespaces/{NS}"
    wait_for(lambda: cluster.request("GET", path)["metadata"].get("deletionTimestamp"), 60)
    for kind in (
        "/api/v1/namespaces/{}/pods",
        "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{}/nodefeatures",
    ):
        for o in cluster.request("GET", kind.format(NS))["items"]:
            cluster.request(
                "DELETE", f"{kind.format(NS)}/{o['metadata']['name']}", {"gracePeriodSeconds": 0}
            )
    ns = cluster.request("GET", path)
    ns["spec"]["finalizers"] = []
    cluster.request("PUT", f"{path}/finalize", ns)
