"""The chart's install, upgrade, output switch and uninstall on a real kube-apiserver, with
Helm 3 and Helm 4 (tests/e2e/build-tools.sh builds both from their Go modules): a fresh
etcd + kube-apiserver per Helm major, the real ``helm`` talking to it with admin
credentials.

What the controllers would do is done by the test, as in test_install_doc.py: the pod of
the DaemonSet on the GPU node is created from the installed template (through the real
API, so Pod Security admission judges it) and its agent runs once as that pod would (the
template's arguments and environment, a token of the chart's ServiceAccount bound to the
pod, so the chart's Role and admission policy apply).

Checked, in order:

1. NOTES: without NFD's CRDs and in a namespace that enforces Pod Security ``baseline``,
   ``helm install`` warns about both (and the API indeed rejects the DaemonSet's pod);
   labelled ``privileged`` with the CRDs installed, ``helm upgrade`` warns about neither.
2. The agent publishes its NodeFeature (default output, ``nodefeature``).
3. ``helm upgrade --set 'outputs={featurefile}'``: the new pod's agent writes its feature
   file and removes the NodeFeature the old output published (no stale labels).
4. A second release in another namespace installs next to the first (the cluster-scoped
   admission policy is named per release and namespace).
5. ``helm uninstall``: the release's objects, cluster-scoped ones included, are gone.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, fixture_root, nfd_gpu_cmd
from tests.deploy import renderings as r
from tests.e2e.cluster import (
    BIN,
    ApiError,
    Cluster,
    Obj,
    container_env,
    daemonset_pod,
    free_port,
    load_yaml_docs,
)
from tests.e2e.conftest import NFD_CRDS, Proc, node_object
from tests.e2e.test_admission_policy import bound_token
from tests.e2e.test_cluster import agent_env
from tests.e2e.test_install_doc import empty_cluster  # noqa: F401  (fixture)

NS = "nfd-gpu"
NODE = "lifecycle-gpu-node"
FIXTURE = "hgx-h100"
NF_PATH = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-{NODE}"
PSA = "pod-security.kubernetes.io/enforce"
# cluster-scoped: they must go with the release, and be unique per release and namespace
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"


def helm(cluster: Cluster, home: Path, binary: str, *args: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))},
        "KUBECONFIG": str(cluster.admin_kubeconfig),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    p = subprocess.run(
        [r.tool(binary), *args], capture_output=True, text=True, env=env, timeout=180, cwd=REPO
    )
    assert p.returncode == 0, f"{binary} {' '.join(args)}: rc {p.returncode}\n{p.stdout}{p.stderr}"
    return p.stdout + p.stderr


def namespace(cluster: Cluster, name: str, level: str) -> None:
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {PSA: level}},
        }
    )


def pod_of_daemonset(cluster: Cluster) -> Obj:
    """The DaemonSet's pod on the GPU node, created from the installed template as the
    DaemonSet controller would (Pod Security admission judges it)."""
    ds = cluster.request("GET", f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu")
    template = ds["spec"]["template"]
    spec = {**template["spec"], "nodeName": NODE}
    pod: Obj = cluster.request(
        "POST",
        f"/api/v1/namespaces/{NS}/pods",
        daemonset_pod(ds, spec, template["metadata"]["labels"]),
    )
    return pod


def run_as_pod(cluster: Cluster, pod: Obj, work: Path) -> str:
    """The pod's agent, once: the template's arguments (host paths mapped to the fixture and
    ``work``), its downward-API environment, a token bound to the pod; returns its log."""
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "nfd-gpu"]
    features = work / "features.d"
    features.mkdir(parents=True, exist_ok=True)
    mapped = {
        "--root": f"--root={fixture_root(FIXTURE)}",
        "--rules": f"--rules={REPO / 'rules'}",
        "--features-dir": f"--features-dir={features}",
        "--metrics-address": f"--metrics-address=127.0.0.1:{free_port()}",
    }
    # --remove-on-exit: a oneshot's exit would take the file it wrote with it
    args = [mapped.get(a.split("=")[0], a) for a in container["args"] if a != "--remove-on-exit"]
    env = container_env(pod, container)
    assert pod["spec"].get("automountServiceAccountToken") is not False, "no API access"
    kubeconfig = cluster.write_kubeconfig(
        work / "pod.kubeconfig", {"token": bound_token(cluster, pod, NS)}
    )
    log = work / "agent.log"
    agent = Proc(
        [*nfd_gpu_cmd(), "run", *args, "--oneshot", "--no-udev", "--log-format=text",
         "--log-level=debug", "--kubeconfig", str(kubeconfig)],
        log,
        env={**agent_env(), **env},
    )  # fmt: skip
    rc = agent.proc.wait(60)
    agent.stop()
    text = log.read_text()
    assert rc == 0, text
    return text


def gone(cluster: Cluster, path: str) -> bool:
    try:
        cluster.request("GET", path)
    except ApiError as e:
        return e.status == 404
    return False


@pytest.mark.parametrize("binary", r.HELMS)
def test_install_upgrade_switch_uninstall(
    binary: str,
    empty_cluster: Cluster,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    c = empty_cluster
    home = tmp_path / "helm"
    chart = str(r.CHART)
    c.request("POST", "/api/v1/nodes", node_object(NODE))

    # 1. No CRDs, a baseline namespace: deployed, and the NOTES say what will go wrong.
    namespace(c, NS, "baseline")
    out = helm(c, home, binary, "install", "nfd-gpu", chart, "-n", NS)
    assert "nodefeatures.nfd.k8s-sigs.io) is not installed" in out, out
    assert 'enforces Pod Security level "baseline"' in out, out
    with pytest.raises(ApiError) as e:
        pod_of_daemonset(c)
    assert e.value.status == 403 and "violates PodSecurity" in str(e.value.body), e.value.body
    # fixed as the NOTES say: the warnings go
    for crd in load_yaml_docs(BIN / "nfd-api-crds.yaml"):
        c.apply(crd)
    c.wait_crds(NFD_CRDS)
    namespace(c, NS, "privileged")
    out = helm(c, home, binary, "upgrade", "nfd-gpu", chart, "-n", NS, "--reuse-values")
    assert "WARNING" not in out and "NOTE:" not in out, out
    assert f"kubectl -n {NS} rollout status ds/nfd-gpu" in out, out

    # 2. The default output: the agent publishes its NodeFeature.
    pod = pod_of_daemonset(c)
    run_as_pod(c, pod, tmp_path / "pass1")
    nf = c.request("GET", NF_PATH)
    assert nf["spec"]["labels"]["gpu.feature.node.kubernetes.io/count"] == "8"
    # the rollout replaces it (no kubelet here: deleted at once)
    c.request(
        "DELETE",
        f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}",
        {"gracePeriodSeconds": 0},
    )

    # 3. Switch to the feature file: the new pod's agent removes the old NodeFeature.
    helm(c, home, binary, "upgrade", "nfd-gpu", chart, "-n", NS, "--reuse-values",
         "--set", "outputs={featurefile}")  # fmt: skip
    pod = pod_of_daemonset(c)
    log = run_as_pod(c, pod, tmp_path / "pass2")
    assert gone(c, NF_PATH), log
    assert f"removed NodeFeature {NS}/nfd-gpu-{NODE}" in log, log
    text = (tmp_path / "pass2" / "features.d" / "nfd-gpu").read_text()
    assert "gpu.feature.node.kubernetes.io/count=8" in text
    # again (a restart): nothing left to remove, nothing logged as a problem
    log = run_as_pod(c, pod, tmp_path / "pass3")
    assert "removed NodeFeature" not in log and "not removed" not in log, log

    # 4. A second release of the same name in another namespace installs beside it.
    namespace(c, "other", "privileged")
    helm(c, home, binary, "install", "nfd-gpu", chart, "-n", "other")
    assert not gone(c, VAP + "nfd-gpu-nfd-gpu-own-nodefeature")
    assert not gone(c, VAP + "nfd-gpu-other-own-nodefeature")

    # 5. Uninstall: the release's objects go, cluster-scoped ones too; the other stays.
    helm(c, home, binary, "uninstall", "nfd-gpu", "-n", NS)
    assert gone(c, f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu")
    assert gone(c, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles/nfd-gpu")
    assert gone(c, VAP + "nfd-gpu-nfd-gpu-own-nodefeature")
    assert not gone(c, VAP + "nfd-gpu-other-own-nodefeature")
    helm(c, home, binary, "uninstall", "nfd-gpu", "-n", "other")
    assert gone(c, VAP + "nfd-gpu-other-own-nodefeature")


@pytest.mark.parametrize("binary", r.HELMS)
def test_first_install_with_create_namespace_warns(
    binary: str,
    empty_cluster: Cluster,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    """The common first install, ``helm install --create-namespace`` without NFD: the
    NOTES still say that the CRD is missing and that the new namespace has no Pod Security
    label (the release namespace does not exist yet when they are rendered)."""
    out = helm(empty_cluster, tmp_path / "helm", binary, "install", "nfd-gpu", str(r.CHART),
               "-n", "fresh", "--create-namespace")  # fmt: skip
    assert "nodefeatures.nfd.k8s-sigs.io) is not installed" in out, out
    assert "namespace fresh has no pod-security.kubernetes.io/enforce label" in out, out
    fix = (
        "kubectl label --overwrite namespace fresh pod-security.kubernetes.io/enforce=privileged"
        " pod-security.kubernetes.io/warn=privileged pod-security.kubernetes.io/audit=privileged"
    )
    assert fix in out, out
