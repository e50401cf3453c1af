"""nfd-gpu against a real control plane: kube-apiserver, nfd-master, nfd-worker.

Everything runs as a subprocess on loopback (see conftest.py and cluster.py). The judges
are NFD's and Kubernetes' own code, built by ``tests/e2e/build.sh``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.scan import run_scan
from tests.agent.hostroot_util import add_gpu, copy_fixture
from tests.conftest import REPO, fixture_root, nfd_gpu_cmd
from tests.deploy import kustomize
from tests.e2e.cluster import (
    BIN,
    KINDS,
    ApiError,
    Cluster,
    Obj,
    daemonset_pod,
    free_port,
    load_yaml_docs,
    nodefeature_agent_args,
    nodefeature_oneshot_args,
)
from tests.e2e.conftest import NFD_NAMESPACE, NS, Proc, wait_for

SA_USER = f"system:serviceaccount:{NS}:nfd-gpu"
OVERLAYS = sorted(p for p in (REPO / "deploy" / "overlays").iterdir() if p.is_dir())
COUNT = "gpu.feature.node.kubernetes.io/count"
# Labels the test itself puts on its Node objects.
OWN_LABELS = {"kubernetes.io/hostname"}


def agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NFD_GPU_", "KUBE"))}
    env["PYTHONPATH"] = str(REPO)
    return env


def nfd_gpu(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [*nfd_gpu_cmd(), *args], capture_output=True, text=True, env=agent_env(), timeout=timeout
    )
    assert p.returncode == 0, f"nfd-gpu {' '.join(args)}: rc {p.returncode}\n{p.stderr}"
    return p


def node_labels(cluster: Cluster, name: str) -> dict[str, str]:
    node = cluster.request("GET", f"/api/v1/nodes/{name}")
    return {k: v for k, v in node["metadata"].get("labels", {}).items() if k not in OWN_LABELS}


def audit(cluster: Cluster, user: str | None = None, *, after: int = 0, **match: str) -> list[Obj]:
    """Audit events (ResponseComplete) by ``user`` whose objectRef has ``match``'s values,
    from the ``after``-th event on (the cluster lives for the session: other tests' agents
    share the ServiceAccount)."""
    out = []
    for ev in cluster.audit_events()[after:]:
        if ev.get("stage") != "ResponseComplete":
            continue
        if user is not None and ev["user"]["username"] != user:
            continue
        ref = ev.get("objectRef") or {}
        if all(ref.get(k) == v for k, v in match.items()):
            out.append(ev)
    return out


class Agent(Proc):
    """``nfd-gpu run`` as a long-running subprocess."""

    def __init__(self, args: list[str], log: Path, extra_env: dict[str, str]) -> None:
        super().__init__([*nfd_gpu_cmd(), "run", *args], log, env={**agent_env(), **extra_env})


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    agents: list[Agent] = []

    def start(*args: str, **env: str) -> Agent:
        a = Agent(list(args), tmp_path / f"agent{len(agents)}.log", env)
        agents.append(a)
        return a

    yield start
    for a in agents:
        a.stop()


# -- NodeFeature path -------------------------------------------------------------------


def test_nodefeature_path_labels_updates_steady_state(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    start_agent: Callable[..., Agent],
    tmp_path: Path,
) -> None:
    node = "e2e-nodefeature"
    make_node(node)
    # The agent's own Pod, owned by the shipped DaemonSet (no controllers run here: the
    # objects only exist for the owner references).
    ds = next(o for o in agent_sa["objects"] if o["kind"] == "DaemonSet")
    ds = kube_cluster.apply(ds)
    spec = {
        "nodeName": node,
        "serviceAccountName": "nfd-gpu",
        "containers": [{"name": "nfd-gpu", "image": "ghcr.io/nfd-gpu/nfd-gpu:v0.1.0"}],
    }
    pod = kube_cluster.request(
        "POST", f"/api/v1/namespaces/{NS}/pods", daemonset_pod(ds, spec, name="nfd-gpu-e2e")
    )
    root = copy_fixture("hgx-h100", str(tmp_path / "root"))
    before = len(kube_cluster.audit_events())
    agent = start_agent(
        *nodefeature_agent_args(root, agent_sa["kubeconfig"], "--interval", "1"),
        NODE_NAME=node,
        POD_NAMESPACE=NS,
        POD_NAME=pod["metadata"]["name"],
        POD_UID=pod["metadata"]["uid"],
    )
    want = run_scan(root).labels
    assert want[COUNT] == "8"

    def why() -> str:
        return f"agent:\n{agent.log()}\nnfd-master:\n{nfd_master.log()}"

    # nfd-master turns the NodeFeature into exactly the scan's labels on the Node.
    wait_for(lambda: node_labels(kube_cluster, node) == want, 30, why)
    nf_path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-{node}"
    nf = kube_cluster.request("GET", nf_path)
    assert nf["spec"]["labels"] == want
    assert nf["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": node}
    owners = [(r["kind"], r["uid"]) for r in nf["metadata"]["ownerReferences"]]
    assert owners == [("Pod", pod["metadata"]["uid"]), ("DaemonSet", ds["metadata"]["uid"])]

    # Steady state: several passes, not one request from the agent, no Node write.
    seen = len(audit(kube_cluster, SA_USER, after=before))
    node_writes = len(
        [e for e in audit(kube_cluster, resource="nodes", name=node) if e["verb"] != "get"]
    )
    rv = nf["metadata"]["resourceVersion"]
    time.sleep(4.0)
    assert agent.proc.poll() is None, why()
    assert len(audit(kube_cluster, SA_USER, after=before)) == seen, (
        "agent sent requests in steady state"
    )
    assert kube_cluster.request("GET", nf_path)["metadata"]["resourceVersion"] == rv
    assert (
        len([e for e in audit(kube_cluster, resource="nodes", name=node) if e["verb"] != "get"])
        == node_writes
    )
    sa_verbs = sorted(e["verb"] for e in audit(kube_cluster, SA_USER, after=before))
    # start: one GET of its Pod (owner refs), one GET (404) and one create of the object
    assert sa_verbs == ["create", "get", "get"], sa_verbs

    # A fixture change (a GPU hot-plugged) reaches the Node on the next pass: one patch.
    add_gpu(root, "0000:18:00.0", "0000:f0:00.0")
    want2 = run_scan(root).labels
    assert want2[COUNT] == "9"
    t0 = time.monotonic()
    wait_for(lambda: node_labels(kube_cluster, node) == want2, 15, why)
    # the next pass (1 s interval) and nfd-master's reaction; generous for a loaded CI box
    assert time.monotonic() - t0 < 10.0
    updates = [e for e in audit(kube_cluster, SA_USER, after=before) if e["verb"] == "patch"]
    assert len(updates) == 1 and updates[0]["responseStatus"]["code"] == 200
    # the whole conversation: NodeFeature absent (read before the first pass for its held
    # health, agent/heldstate.py; the first publish needs no second GET), own Pod, created,
    # patched once
    calls = [
        (e["verb"], e["objectRef"]["resource"], e["responseStatus"]["code"])
        for e in audit(kube_cluster, SA_USER, after=before)
    ]
    assert calls == [
        ("get", "nodefeatures", 404),
        ("get", "pods", 200),
        ("create", "nodefeatures", 201),
        ("patch", "nodefeatures", 200),
    ], calls


# -- RBAC: the ServiceAccount can do exactly what the Role says -------------------------

# Requests outside the Role, each of which must be answered 403 for the agent's token.
DENIED: list[tuple[str, str, Obj | None]] = [
    ("GET", "/api/v1/nodes/e2e-nodefeature", None),
    ("PATCH", "/api/v1/nodes/e2e-nodefeature", {"metadata": {"labels": {"x": "y"}}}),
    ("GET", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures", None),
    ("DELETE", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-x", None),
    ("POST", "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/default/nodefeatures", {}),
    ("GET", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NFD_NAMESPACE}/nodefeatures/x", None),
    ("POST", "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules", {}),
    ("GET", f"/api/v1/namespaces/{NS}/pods", None),
    ("GET", "/api/v1/namespaces/default/pods/x", None),
    ("GET", f"/api/v1/namespaces/{NS}/secrets", None),
    ("GET", f"/api/v1/namespaces/{NS}/configmaps/x", None),
    ("GET", f"/apis/apps/v1/namespaces/{NS}/daemonsets/nfd-gpu", None),
    ("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/nfd-gpu/token", {}),
]

# (verb, group, resource, namespace) probes for SubjectAccessReview.
VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
RESOURCES = [
    ("nfd.k8s-sigs.io", "nodefeatures"),
    ("nfd.k8s-sigs.io", "nodefeaturerules"),
    ("nfd.k8s-sigs.io", "nodefeaturegroups"),
    ("", "pods"),
    ("", "nodes"),
    ("", "secrets"),
    ("", "configmaps"),
    ("", "serviceaccounts"),
    ("apps", "daemonsets"),
    ("rbac.authorization.k8s.io", "roles"),
]
# What every authenticated user may do (the bootstrap system:basic-user ClusterRole).
BASIC_USER = {
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create"),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "create"),
    ("authentication.k8s.io", "selfsubjectreviews", "create"),
}


def role_allows(role: Obj, group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
        for r in role["rules"]
    )


def test_agent_service_account_can_do_nothing_beyond_the_role(
    kube_cluster: Cluster, agent_sa: dict[str, Any]
) -> None:
    token, role = agent_sa["token"], agent_sa["role"]
    # The token works (the Role allows this GET; the object is absent: 404, not 403) ...
    with pytest.raises(ApiError) as e:
        kube_cluster.request(
            "GET",
            f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-absent",
            token=token,
        )
    assert e.value.status == 404
    review = kube_cluster.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        token=token,
    )
    assert review["status"]["userInfo"]["username"] == SA_USER
    # ... and every request beyond the Role is denied by the server.
    for method, path, body in DENIED:
        with pytest.raises(ApiError) as e:
            kube_cluster.request(method, path, body, token=token)
        assert e.value.status == 403, (method, path, e.value)

    # The authorizer's answer for every verb x resource x namespace equals the Role's.
    for ns in (NS, "default", NFD_NAMESPACE):
        for group, resource in RESOURCES:
            for verb in VERBS:
                sar = kube_cluster.request(
                    "POST",
                    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                    {
                        "apiVersion": "authorization.k8s.io/v1",
                        "kind": "SubjectAccessReview",
                        "spec": {
                            "user": SA_USER,
                            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
                            "resourceAttributes": {
                                "namespace": ns,
                                "verb": verb,
                                "group": group,
                                "resource": resource,
                            },
                        },
                    },
                )
                want = ns == NS and role_allows(role, group, resource, verb)
                assert sar["status"]["allowed"] is want, (ns, group, resource, verb)

    # The rules the server holds for the agent in its namespace: the Role's plus the
    # rules every authenticated user has, nothing else.
    rules = kube_cluster.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": NS},
        },
        token=token,
    )
    granted = {
        (g, r, v)
        for rule in rules["status"]["resourceRules"]
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule["verbs"]
    }
    in_role = {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert granted == in_role | BASIC_USER


def run_nfd_worker(
    cluster: Cluster, node: str, work: Path, sources: str, label_sources: str = "local"
) -> subprocess.CompletedProcess[str]:
    """One pass (-oneshot) of NFD's nfd-worker for ``node`` in directory ``work``: its
    feature files are ``work/features.d/``, the host it inspects ``work/host-sys`` etc.
    (see build.sh). Only the feature sources ``sources``; labels only from
    ``label_sources`` (default: feature files)."""
    (work / "nfd-worker.conf").write_text("")
    return subprocess.run(
        [
            str(BIN / "nfd-worker"),
            "-oneshot",
            f"-kubeconfig={cluster.admin_kubeconfig}",
            f"-config={work / 'nfd-worker.conf'}",
            f"-feature-sources={sources}",
            f"-label-sources={label_sources}",
            "-no-owner-refs",
            f"-port={free_port()}",
        ],
        cwd=work,
        env={**os.environ, "NODE_NAME": node, "KUBERNETES_NAMESPACE": NFD_NAMESPACE},
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- feature file path through the real nfd-worker ---------------------------------------

PATH_FIXTURES = ["hgx-h100", "mi300x-cpx-nps4", "max1550-xe"]


@pytest.mark.parametrize("fixture", PATH_FIXTURES)
def test_feature_file_via_nfd_worker_equals_nodefeature(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    tmp_path: Path,
    fixture: str,
) -> None:
    """On one Node: the NodeFeature path alone, then the feature-file path alone through
    NFD's nfd-worker; nfd-master gives the same labels (the scan's) both times."""
    root = str(fixture_root(fixture))
    node = f"e2e-paths-{fixture}"
    make_node(node)
    want = run_scan(root).labels
    worker_log = ""

    def why() -> str:
        return (
            f"node: {node_labels(kube_cluster, node)}\nwant: {want}"
            f"\nnfd-master:\n{nfd_master.log()}\nnfd-worker:\n{worker_log}"
        )

    # 1. NodeFeature path: one pass as the ServiceAccount.
    nfd_gpu(
        *nodefeature_oneshot_args(root, node, NS, agent_sa["kubeconfig"]),
    )
    wait_for(lambda: node_labels(kube_cluster, node) == want, 30, why)
    via_nodefeature = node_labels(kube_cluster, node)
    # gone again once the NodeFeature is deleted
    kube_cluster.request(
        "DELETE", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/nfd-gpu-{node}"
    )
    wait_for(lambda: node_labels(kube_cluster, node) == {}, 30, why)

    # 2. Feature-file path: nfd-gpu writes features.d/nfd-gpu; NFD's nfd-worker (local
    # source only, its features.d linked as the relative "features.d/") publishes it.
    work = tmp_path / "worker"
    (work / "features.d").mkdir(parents=True)
    nfd_gpu(
        "run",
        "--oneshot",
        "--output",
        "featurefile",
        "--root",
        root,
        "--no-udev",
        "--features-dir",
        str(work / "features.d"),
    )
    assert [p.name for p in (work / "features.d").iterdir()] == ["nfd-gpu"]
    worker = run_nfd_worker(kube_cluster, node, work, "local")
    worker_log = worker.stderr[-3000:]
    assert worker.returncode == 0, worker_log
    wait_for(lambda: node_labels(kube_cluster, node) == want, 30, why)
    assert node_labels(kube_cluster, node) == via_nodefeature
    # the worker's NodeFeature carries them as labels from the local source
    nf = kube_cluster.request(
        "GET", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NFD_NAMESPACE}/nodefeatures/{node}"
    )
    assert nf["spec"]["labels"] == want


# -- the shipped NodeFeatureRules evaluated by nfd-master --------------------------------

RULE_FIXTURES = ["hgx-h100", "a100-t4", "mi300x-cpx-nps4", "max1550-xe", "workstation-rtx4090"]
RULE_FILES = [
    *sorted((REPO / "rules").glob("*.yaml")),
    REPO / "deploy" / "examples" / "nodefeaturerules.yaml",
]


@pytest.fixture
def rule_objects(kube_cluster: Cluster) -> Iterator[list[Obj]]:
    objs = [o for f in RULE_FILES for o in load_yaml_docs(f)]
    assert objs and all(o["kind"] == "NodeFeatureRule" for o in objs)
    yield objs
    for o in objs:
        with contextlib.suppress(ApiError):
            kube_cluster.request(
                "DELETE", f"/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/{o['metadata']['name']}"
            )


def kernel_module_features(root: Path, node: str) -> Obj:
    """What NFD v0.19.0's kernel source publishes about modules on host ``root``:
    ``loadedmodule`` = first field of each proc/modules line; ``enabledmodule`` = those plus
    the ``.ko`` basenames in lib/modules/<proc/sys/kernel/osrelease>/modules.builtin."""
    loaded = [
        line.split()[0] for line in (root / "proc/modules").read_text().splitlines() if line.strip()
    ]
    builtin: list[str] = []
    release = root / "proc/sys/kernel/osrelease"
    if release.exists():
        mb = root / "lib/modules" / release.read_text().strip() / "modules.builtin"
        if mb.exists():
            builtin = [
                Path(line.strip()).name.removesuffix(".ko")
                for line in mb.read_text().splitlines()
                if line.strip().endswith(".ko")
            ]
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"{node}-kernel",
            "namespace": NFD_NAMESPACE,
            "labels": {"nfd.node.kubernetes.io/node-name": node},
        },
        "spec": {
            "features": {
                "flags": {
                    "kernel.loadedmodule": {"elements": {m: {} for m in loaded}},
                    "kernel.enabledmodule": {"elements": {m: {} for m in loaded + builtin}},
                }
            }
        },
    }


def test_shipped_rules_label_nodes_as_rules_test_predicts(
    kube_cluster: Cluster,
    nfd_master: Proc,
    agent_sa: dict[str, Any],
    make_node: Callable[[str], Obj],
    rule_objects: list[Obj],
    tmp_path: Path,
) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    for i, f in enumerate(RULE_FILES):
        shutil.copy(f, rules_dir / f"{i:02d}-{f.name}")
    expected: dict[str, dict[str, str]] = {}
    for fixture in RULE_FIXTURES:
        root = str(fixture_root(fixture))
        node = f"e2e-rules-{fixture}"
        make_node(node)
        nfd_gpu(
            *nodefeature_oneshot_args(root, node, NS, agent_sa["kubeconfig"]),
        )
        # What nfd-worker publishes next to nfd-gpu on such a node (some shipped rules
        # need only NFD's own features): pci.device from the real nfd-worker's pci source
        # reading the fixture's sysfs (host-sys -> ROOT/sys) ...
        work = tmp_path / node
        work.mkdir()
        (work / "host-sys").symlink_to(Path(root) / "sys")
        worker = run_nfd_worker(kube_cluster, node, work, "pci")
        assert worker.returncode == 0, worker.stderr[-3000:]
        # ... and kernel.loadedmodule/enabledmodule, which NFD's kernel source reads from
        # the fixed path /proc/modules (no host prefix): NFD's algorithm on the fixture
        # (loaded: proc/modules; enabled: loaded + lib/modules/<osrelease>/modules.builtin),
        # in a NodeFeature of its own.
        kube_cluster.apply(kernel_module_features(Path(root), node))
        pred = json.loads(nfd_gpu("rules", "test", str(rules_dir), "--root", root).stdout)
        assert pred["errors"] == [], pred
        assert not pred["taints"] and not pred["extendedResources"], pred
        expected[node] = {**run_scan(root).labels, **pred["labels"]}
    # at least one fixture gets rule labels, or this test checks nothing about rules
    assert any(
        len(v) > len(run_scan(str(fixture_root(f))).labels)
        for f, v in zip(RULE_FIXTURES, expected.values(), strict=True)
    )

    for obj in rule_objects:
        kube_cluster.apply(obj)

    def why() -> str:
        got = {n: node_labels(kube_cluster, n) for n in expected}
        diff = {n: set(got[n].items()) ^ set(expected[n].items()) for n in expected}
        return f"diff: {diff}\nnfd-master:\n{nfd_master.log()}"

    wait_for(
        lambda: all(node_labels(kube_cluster, n) == want for n, want in expected.items()), 30, why
    )


# -- every overlay validated and admitted by the server (dry run) -----------------------


def dry_run_all(cluster: Cluster, objs: list[Obj]) -> dict[str, int]:
    """Server-side dry-run apply of each object; ``kind/name`` -> HTTP status."""
    out = {}
    for obj in objs:
        assert obj["kind"] in KINDS, f"add {obj['kind']} to tests/e2e/cluster.py KINDS"
        try:
            cluster.apply(obj, dry_run=True)
            out[f"{obj['kind']}/{obj['metadata']['name']}"] = 200
        except ApiError as e:
            out[f"{obj['kind']}/{obj['metadata']['name']}"] = e.status
    return out


def test_overlays_pass_server_side_dry_run(kube_cluster: Cluster, agent_sa: dict[str, Any]) -> None:
    assert [p.name for p in OVERLAYS] == [
        "compat",
        "nfd-worker-sidecar",
        "nodefeature-api",
        "nvml",
    ]
    renders = {p.name: kustomize.build(p) for p in OVERLAYS}
    # No overlay needs a CRD beyond NFD's (the PodMonitor is the monitoring component):
    # everything is valid and admitted on a cluster without the Prometheus Operator.
    np_before = kube_cluster.request(
        "GET", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"
    )["items"]
    for name, objs in renders.items():
        got = dry_run_all(kube_cluster, objs)
        assert got == dict.fromkeys(got, 200), name
        assert not any(k.startswith("PodMonitor/") for k in got), name
        assert any(k.startswith("NetworkPolicy/") for k in got), name
    # Nothing was stored by the dry runs: e.g. the NetworkPolicy they carry does not exist.
    nps = kube_cluster.request("GET", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies")
    assert nps["items"] == np_before
