"""The ValidatingAdmissionPolicy that confines each node's agent to its own NodeFeature
deploy/overlays/nodefeature-api/validatingadmissionpolicy.yaml.

Offline: the rendered policy and binding validate against the Kubernetes 1.30 OpenAPI
schema (tests/deploy does the strict schema check for every rendered object); here the CEL
program's pieces are checked for what they must reference. What the policy does on a real
kube-apiserver, with tokens bound to Pods on Nodes and the real agent, is proven in
tests/e2e/test_admission_policy.py.
"""

from __future__ import annotations

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
