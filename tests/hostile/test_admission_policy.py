"""The ValidatingAdmissionPolicy that confines each node's agent to its own NodeFeature
(finding 9 of issue 11): deploy/overlays/nodefeature-api/validatingadmissionpolicy.yaml.

Offline (always): the rendered policy and binding validate against the Kubernetes 1.30
OpenAPI schema (tests/deploy does the strict schema check for every rendered object);
here the CEL program's pieces are checked for what they must reference.
Online (``kube_apiserver`` fixture, a real kube-apiserver): the policy is applied, and
tokens bound to pods on two nodes try to write their own and the other node's object.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.kustomize import build, load_docs

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "deploy/overlays/nodefeature-api/validatingadmissionpolicy.yaml"
NODE_EXTRA = "authentication.kubernetes.io/node-name"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in load_docs(POLICY)}


def test_policy_is_rendered_and_schema_valid() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    objs = build(REPO / "deploy/overlays/nodefeature-api")
    kinds = {o["kind"]: o for o in objs}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= set(kinds)
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        assert "namespace" not in kinds[kind]["metadata"]  # cluster-scoped
        kv.validate(kinds[kind], "1.30.0", strict=True)
    binding = kinds["ValidatingAdmissionPolicyBinding"]
    assert binding["spec"]["policyName"] == kinds["ValidatingAdmissionPolicy"]["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_policy_program_references() -> None:
    vap = _docs()["ValidatingAdmissionPolicy"]["spec"]
    assert vap["failurePolicy"] == "Fail"
    (rule,) = vap["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["nfd.k8s-sigs.io"] and rule["resources"] == ["nodefeatures"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    (cond,) = vap["matchConditions"]
    # the ServiceAccount the deploy/ manifests run the agent as
    sa = load_docs(REPO / "deploy/base/serviceaccount.yaml")[0]["metadata"]["name"]
    assert f"':{sa}'" in cond["expression"] and "request.namespace" in cond["expression"]
    variables = {v["name"]: v["expression"] for v in vap["variables"]}
    assert f"request.userInfo.extra['{NODE_EXTRA}']" in variables["nodeName"]
    text = " ".join(v["expression"] for v in vap["validations"])
    # the sink's object name and node label (nfd_gpu/sinks/nodefeature.py)
    from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL

    assert "'nfd-gpu-' + variables.nodeName" in text
    assert f"'{NODE_NAME_LABEL}'" in text
    for v in vap["validations"]:
        assert v.get("message") or v.get("messageExpression")
        # balanced quotes and parentheses: a cheap guard against a broken edit
        e = v["expression"]
        assert e.count("'") % 2 == 0 and e.count("(") == e.count(")")


# -- against a real API server ---------------------------------------------------------


def _client(kubeconfig: str | None = None, token: str | None = None, base: Any = None) -> Any:
    import kubernetes

    cfg = kubernetes.client.Configuration()
    if kubeconfig:
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    else:
        cfg.host = base.host
        cfg.ssl_ca_cert = base.ssl_ca_cert
        cfg.verify_ssl = base.verify_ssl
        cfg.api_key = {"authorization": "Bearer " + (token or "")}
    return kubernetes.client.ApiClient(cfg)


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.kube_apiserver
def test_agent_writes_only_its_own_nodefeature(kube_apiserver: str) -> None:
    import kubernetes
    from kubernetes.client.exceptions import ApiException

    admin = _client(kube_apiserver)
    core = kubernetes.client.CoreV1Api(admin)
    ns = f"nfd-gpu-vap-{uuid.uuid4().hex[:6]}"
    # NFD's CRDs, the Role/RoleBinding/ServiceAccount and the policy from deploy/
    crds = load_docs(REPO.parent / "shared/reference/nfd/nfd-api-crds.yaml")
    objs = [o for o in build(REPO / "deploy/overlays/nodefeature-api") if o["kind"] != "DaemonSet"]
    dyn = kubernetes.dynamic.DynamicClient(admin)
    for o in crds:
        try:
            dyn.resources.get(api_version=o["apiVersion"], kind=o["kind"]).create(body=o)
        except ApiException as e:
            if e.status != 409:
                raise
    core.create_namespace({"metadata": {"name": ns}})
    for o in objs:
        if o["kind"] in ("Namespace", "PodMonitor"):
            continue
        o = json.loads(json.dumps(o))
        if "namespace" in o["metadata"]:
            o["metadata"]["namespace"] = ns
        if o["kind"] == "RoleBinding":
            for s in o["subjects"]:
                s["namespace"] = ns
        res = dyn.resources.get(api_version=o["apiVersion"], kind=o["kind"])
        try:
            res.create(body=o, namespace=o["metadata"].get("namespace"))
        except ApiException as e:
            if e.status != 409:
                raise
    tokens = {}
    for node in ("node-a", "node-b"):
        try:
            core.create_node({"metadata": {"name": node}})
        except ApiException as e:
            if e.status != 409:
                raise
        pod = core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": f"agent-{node}"},
                "spec": {
                    "nodeName": node,
                    "serviceAccountName": "nfd-gpu",
                    "containers": [{"name": "c", "image": "nfd-gpu:test"}],
                },
            },
        )
        tr = core.create_namespaced_service_account_token(
            "nfd-gpu",
            ns,
            {
                "spec": {
                    "audiences": [],
                    "boundObjectRef": {
                        "kind": "Pod",
                        "apiVersion": "v1",
                        "name": pod.metadata.name,
                        "uid": pod.metadata.uid,
                    },
                }
            },
        )
        tokens[node] = tr.status.token
        assert _claims(tokens[node])["kubernetes.io"]["node"]["name"] == node
    time.sleep(2)  # the policy's type check and binding settle

    def write(as_node: str, obj_node: str, label_node: str | None = None) -> int:
        api = kubernetes.client.CustomObjectsApi(
            _client(token=tokens[as_node], base=admin.configuration)
        )
        body = {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {
                "name": f"nfd-gpu-{obj_node}",
                "labels": {"nfd.node.kubernetes.io/node-name": label_node or obj_node},
            },
            "spec": {"labels": {"x": "y"}},
        }
        try:
            api.create_namespaced_custom_object(
                "nfd.k8s-sigs.io", "v1alpha1", ns, "nodefeatures", body
            )
        except ApiException as e:
            return int(e.status)
        return 201

    assert write("node-a", "node-a") == 201
    assert write("node-a", "node-b") == 403  # another node's object
    assert write("node-b", "node-b", label_node="node-a") == 403  # wrong node label
    assert write("node-b", "node-b") == 201
    core.delete_namespace(ns)
