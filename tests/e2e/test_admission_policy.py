"""The ValidatingAdmissionPolicy that confines each node's agent to its own NodeFeature
on the real kube-apiserver of tests/e2e (``kube_cluster``).

deploy/overlays/nodefeature-api/validatingadmissionpolicy.yaml is applied as rendered by
the overlay. The agent's ServiceAccount gets tokens from the TokenRequest API bound to a Pod
that is scheduled on a Node (``spec.nodeName``; no kubelet needed): the API server then puts
the node into the token and into the request's user extra
``authentication.kubernetes.io/node-name`` (ServiceAccountTokenPodNodeInfo), which is what
the policy reads. The policy is cluster-wide, so it is removed again after this module (the
other e2e tests use an unbound token) and that removal is confirmed.

The offline checks of the same file (schema, what its CEL references) stay in
tests/hostile/test_admission_policy.py.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.scan import run_scan
from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL
from tests.conftest import fixture_root, nfd_gpu_cmd
from tests.e2e.cluster import ApiError, Cluster, Obj, nodefeature_oneshot_args
from tests.e2e.conftest import node_object, rendered, wait_for
from tests.e2e.test_cluster import agent_env

NODES = ("e2e-vap-a", "e2e-vap-b")
NODE_EXTRA = "authentication.kubernetes.io/node-name"
# Its own namespace with the shipped ServiceAccount, Role and RoleBinding: the policy
# matches the ServiceAccount named nfd-gpu in the object's namespace, whichever that is, and
# the other e2e tests count the requests of nfd-gpu/nfd-gpu in the audit log.
NS = "nfd-gpu-vap"
NF = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures"
VAP = "/apis/admissionregistration.k8s.io/v1"
POLICY = "nfd-gpu-own-nodefeature"
NO_NODE = "only with a token bound to a pod on a node"
LABEL = "gpu.feature.node.kubernetes.io/e2e-x"  # under a namespace the profiles write
FOREIGN = "only under the namespaces its profiles write"


def nodefeature(name: str, label: str | None, value: str = "1") -> Obj:
    meta: Obj = {"name": name}
    if label is not None:
        meta["labels"] = {NODE_NAME_LABEL: label}
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": meta,
        "spec": {"labels": {LABEL: value}},
    }


def claims(token: str) -> Any:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def create(cluster: Cluster, token: str, obj: Obj) -> Obj:
    out: Obj = cluster.request("POST", NF, obj, token=token)
    return out


MERGE_PATCH = "application/merge-patch+json"


def denied(cluster: Cluster, token: str, method: str, path: str, body: Obj) -> str:
    """The request must be refused by the policy (403 naming it); its message."""
    with pytest.raises(ApiError) as ei:
        cluster.request(method, path, body, token=token)
    assert ei.value.status == 403, ei.value
    msg = str(ei.value.body.get("message"))
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in msg, msg
    return msg


def delete_nf(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(ApiError):
        cluster.request("DELETE", f"{NF}/{name}")


@pytest.fixture(scope="module")
def policy(kube_cluster: Cluster) -> Iterator[dict[str, Any]]:
    """The shipped policy and binding applied; the agent's ServiceAccount, Role and
    RoleBinding in namespace NS; Pods on two Nodes with node-bound tokens.
    Yields {"tokens": {node: token}, "pods": {node: pod}, "unbound": token}."""
    c = kube_cluster
    render = rendered("nodefeature-api")
    c.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for o in render:
        if o["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            o = json.loads(json.dumps(o))
            o["metadata"]["namespace"] = NS
            for s in o.get("subjects", []):
                s["namespace"] = NS
            c.apply(o)
    objs = [
        o
        for o in render
        if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert sorted(o["kind"] for o in objs) == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    unbound = c.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/nfd-gpu/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    assert "node" not in claims(unbound).get("kubernetes.io", {})
    probe = nodefeature("nfd-gpu-vap-probe", "vap-probe")
    for o in objs:
        c.apply(o)
    tokens: dict[str, str] = {}
    pods: dict[str, Obj] = {}
    try:
        for node in NODES:
            c.apply(node_object(node))
            pod = c.request(
                "POST",
                f"/api/v1/namespaces/{NS}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"nfd-gpu-{node}"},
                    "spec": {
                        "nodeName": node,
                        "serviceAccountName": "nfd-gpu",
                        "containers": [{"name": "nfd-gpu", "image": "nfd-gpu:e2e"}],
                    },
                },
            )
            pods[node] = pod
            tokens[node] = bound_token(c, pod)
            assert claims(tokens[node])["kubernetes.io"]["node"]["name"] == node

        # Active once the unbound token's write is refused by the policy (the server
        # type-checks the policy and syncs the binding asynchronously).
        def active() -> bool:
            try:
                create(c, unbound, probe)
            except ApiError as e:
                if e.status == 403 and POLICY in str(e):
                    return True
                raise
            delete_nf(c, "nfd-gpu-vap-probe")
            return False

        wait_for(active, 30, lambda: c.log_tail())
        yield {"tokens": tokens, "pods": pods, "unbound": unbound}
    finally:
        for o in reversed(objs):
            kind = "validatingadmissionpolicybindings"
            if o["kind"] == "ValidatingAdmissionPolicy":
                kind = "validatingadmissionpolicies"
            with contextlib.suppress(ApiError):
                c.request("DELETE", f"{VAP}/{kind}/{o['metadata']['name']}")

        # Gone once the unbound token may write again; the rest of the suite relies on it.
        def inactive() -> bool:
            try:
                create(c, unbound, probe)
            except ApiError as e:
                if e.status == 403 and POLICY in str(e):
                    return False
                raise
            return True

        wait_for(inactive, 30)
        delete_nf(c, "nfd-gpu-vap-probe")
        for node in NODES:
            delete_nf(c, f"nfd-gpu-{node}")
            with contextlib.suppress(ApiError):
                c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/nfd-gpu-{node}")
            with contextlib.suppress(ApiError):
                c.request("DELETE", f"/api/v1/nodes/{node}")


def bound_token(c: Cluster, pod: Obj, ns: str = NS) -> str:
    """A token of ``ns``'s nfd-gpu ServiceAccount bound to ``pod`` (and so to its node)."""
    tr = c.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/nfd-gpu/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                }
            },
        },
    )
    return str(tr["status"]["token"])


def whoami(c: Cluster, token: str) -> Obj:
    """The user as the API server sees it (SelfSubjectReview): what the policy reads."""
    r = c.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        token=token,
    )
    info: Obj = r["status"]["userInfo"]
    return info


def test_bound_token_carries_the_node_and_unbound_does_not(
    kube_cluster: Cluster, policy: dict[str, Any]
) -> None:
    a, b = NODES
    user = whoami(kube_cluster, policy["tokens"][a])
    assert user["username"] == f"system:serviceaccount:{NS}:nfd-gpu"
    assert user["extra"][NODE_EXTRA] == [a]
    assert whoami(kube_cluster, policy["tokens"][b])["extra"][NODE_EXTRA] == [b]
    assert NODE_EXTRA not in (whoami(kube_cluster, policy["unbound"]).get("extra") or {})


def test_own_nodefeature_create_and_update(kube_cluster: Cluster, policy: dict[str, Any]) -> None:
    c = kube_cluster
    for node in NODES:
        token = policy["tokens"][node]
        name = f"nfd-gpu-{node}"
        obj = create(c, token, nodefeature(name, node))
        assert obj["metadata"]["name"] == name
        obj["spec"]["labels"][LABEL] = "2"
        upd = c.request("PUT", f"{NF}/{name}", obj, token=token)
        assert upd["spec"]["labels"] == {LABEL: "2"}
        assert upd["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]
        delete_nf(c, name)


def test_other_nodes_object_is_denied(kube_cluster: Cluster, policy: dict[str, Any]) -> None:
    c = kube_cluster
    a, b = NODES
    ta = policy["tokens"][a]
    # create another node's object, with that node's label: refused, clearly
    msg = denied(c, ta, "POST", NF, nodefeature(f"nfd-gpu-{b}", b))
    assert f"the nfd-gpu agent on node {a} may write only NodeFeature nfd-gpu-{a}, " in msg
    assert f"not nfd-gpu-{b}" in msg
    # any other name too (the agent writes exactly nfd-gpu-<node>)
    denied(c, ta, "POST", NF, nodefeature("nfd-gpu", a))
    denied(c, ta, "POST", NF, nodefeature(f"nfd-gpu-{a}-x", a))
    # update another node's existing object: refused, and the object is untouched
    own = create(c, policy["tokens"][b], nodefeature(f"nfd-gpu-{b}", b))
    try:
        hijack = json.loads(json.dumps(own))
        hijack["spec"]["labels"] = {LABEL: "stolen"}
        denied(c, ta, "PUT", f"{NF}/nfd-gpu-{b}", hijack)
        hijack["metadata"]["labels"] = {NODE_NAME_LABEL: a}
        denied(c, ta, "PUT", f"{NF}/nfd-gpu-{b}", hijack)
        after = c.request("GET", f"{NF}/nfd-gpu-{b}")
        assert after["spec"] == own["spec"]
        assert after["metadata"]["resourceVersion"] == own["metadata"]["resourceVersion"]
    finally:
        delete_nf(c, f"nfd-gpu-{b}")
    with pytest.raises(ApiError, match="404"):
        c.request("GET", f"{NF}/nfd-gpu-{b}")


def test_mismatching_or_missing_node_label_is_denied(
    kube_cluster: Cluster, policy: dict[str, Any]
) -> None:
    c = kube_cluster
    a, b = NODES
    ta = policy["tokens"][a]
    name = f"nfd-gpu-{a}"
    # nfd-master attributes a NodeFeature to the node in this label: it must be our node
    msg = denied(c, ta, "POST", NF, nodefeature(name, b))
    assert f"label {NODE_NAME_LABEL} must be {a}" in msg
    denied(c, ta, "POST", NF, nodefeature(name, None))
    # and an update of its own object may not move it to another node
    own = create(c, ta, nodefeature(name, a))
    try:
        moved = json.loads(json.dumps(own))
        moved["metadata"]["labels"] = {NODE_NAME_LABEL: b}
        msg = denied(c, ta, "PUT", f"{NF}/{name}", moved)
        assert f"label {NODE_NAME_LABEL} must be {a}" in msg
        assert c.request("GET", f"{NF}/{name}")["metadata"]["labels"] == {NODE_NAME_LABEL: a}
    finally:
        delete_nf(c, name)


def test_token_without_node_is_denied(kube_cluster: Cluster, policy: dict[str, Any]) -> None:
    """No node in the token (not bound to a Pod, or to a Pod not scheduled yet): the policy
    cannot tell which object is the agent's own, so it refuses every write."""
    c = kube_cluster
    a, _ = NODES
    msg = denied(c, policy["unbound"], "POST", NF, nodefeature(f"nfd-gpu-{a}", a))
    assert NO_NODE in msg and NODE_EXTRA in msg
    # a token bound to a Pod that has no node yet
    pod = c.request(
        "POST",
        f"/api/v1/namespaces/{NS}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "nfd-gpu-vap-unscheduled"},
            "spec": {
                "serviceAccountName": "nfd-gpu",
                "containers": [{"name": "nfd-gpu", "image": "nfd-gpu:e2e"}],
            },
        },
    )
    try:
        token = bound_token(c, pod)
        assert "node" not in claims(token)["kubernetes.io"]
        assert "pod" in claims(token)["kubernetes.io"]
        msg = denied(c, token, "POST", NF, nodefeature(f"nfd-gpu-{a}", a))
        assert NO_NODE in msg
    finally:
        c.request("DELETE", f"/api/v1/namespaces/{NS}/pods/nfd-gpu-vap-unscheduled")


def test_other_users_are_not_affected(kube_cluster: Cluster, policy: dict[str, Any]) -> None:
    """Only the nfd-gpu ServiceAccount is matched: the admin (or nfd-master, or a
    cleanup job) may still write any NodeFeature."""
    c = kube_cluster
    a, b = NODES
    obj = c.request("POST", NF, nodefeature(f"nfd-gpu-{b}", a))  # admin, mismatching label
    assert obj["metadata"]["labels"] == {NODE_NAME_LABEL: a}
    delete_nf(c, f"nfd-gpu-{b}")


def run_agent(kubeconfig: Path, node: str, root: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *nfd_gpu_cmd(),
            *nodefeature_oneshot_args(root, node, NS, kubeconfig),
        ],
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=60,
    )


def test_real_agent_publishes_under_the_policy(
    kube_cluster: Cluster, policy: dict[str, Any], tmp_path: Path
) -> None:
    """``nfd-gpu run --oneshot --output nodefeature`` with the node-bound token: its own
    NodeFeature is written as usual; told it runs on another node, it is refused, with the
    policy's message and no object written."""
    c = kube_cluster
    a, b = NODES
    root = str(fixture_root("hgx-h100"))
    kubeconfig = c.write_kubeconfig(tmp_path / "a.kubeconfig", {"token": policy["tokens"][a]})
    try:
        p = run_agent(kubeconfig, a, root)
        assert p.returncode == 0, p.stderr
        nf = c.request("GET", f"{NF}/nfd-gpu-{a}")
        assert nf["spec"]["labels"] == run_scan(root).labels
        assert nf["metadata"]["labels"] == {NODE_NAME_LABEL: a}
        # a second pass updates nothing and is still allowed
        rv = nf["metadata"]["resourceVersion"]
        assert run_agent(kubeconfig, a, root).returncode == 0
        assert c.request("GET", f"{NF}/nfd-gpu-{a}")["metadata"]["resourceVersion"] == rv

        p = run_agent(kubeconfig, b, root)
        assert p.returncode != 0
        err = p.stderr
        assert "admission policy" in err and POLICY in err, err
        assert f"may write only NodeFeature nfd-gpu-{a}, not nfd-gpu-{b}" in err, err
        assert "Traceback" not in err
        with pytest.raises(ApiError, match="404"):
            c.request("GET", f"{NF}/nfd-gpu-{b}")
    finally:
        delete_nf(c, f"nfd-gpu-{a}")


@pytest.mark.parametrize(
    "key",
    [
        "cloud.google.com/gke-accelerator",
        "node-role.kubernetes.io/control-plane",
        "example.com/x",
        "feature.node.kubernetes.io/cpu-model.vendor_id",
        "nvidia.com.evil.io/gpu.product",
        "unprefixed",
    ],
)
def test_labels_outside_the_profiles_namespaces_are_denied(
    kube_cluster: Cluster, policy: dict[str, Any], key: str
) -> None:
    """Issue 34, finding 6: a compromised agent could put any label outside
    ``kubernetes.io`` on its Node through its own object. Now only the namespaces its
    profiles write (nfd_gpu.labels.registry.label_namespaces) pass, on create and update;
    within them it can still lie about its own node (docs/reliability.md)."""
    c = kube_cluster
    a, _ = NODES
    ta = policy["tokens"][a]
    name = f"nfd-gpu-{a}"
    bad = nodefeature(name, a)
    bad["spec"]["labels"][key] = "FAKE"
    assert FOREIGN in denied(c, ta, "POST", NF, bad)
    own = create(c, ta, nodefeature(name, a))
    try:
        upd = json.loads(json.dumps(own))
        upd["spec"]["labels"][key] = "FAKE"
        assert FOREIGN in denied(c, ta, "PUT", f"{NF}/{name}", upd)
        # the sink's merge patch is an UPDATE to the policy: the patched object is judged
        patch = {"spec": {"labels": {key: "FAKE"}}}
        with pytest.raises(ApiError) as ei:
            c.request("PATCH", f"{NF}/{name}", patch, token=ta, content_type=MERGE_PATCH)
        assert ei.value.status == 403 and FOREIGN in str(ei.value.body.get("message"))
        upd["spec"]["labels"] = {"nvidia.com/gpu.product": "x", "amd.com/gpu.family": "y"}
        assert (
            c.request("PUT", f"{NF}/{name}", upd, token=ta)["spec"]["labels"]
            == (upd["spec"]["labels"])
        )
    finally:
        delete_nf(c, name)
