"""deploy/helm/nfd-gpu: helm lint, helm template for each values set of HELM_MATRIX, every
object validated like the kustomize renderings, and the same objects as kustomize where
the two overlap (modulo Helm's standard labels)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy import renderings as r
from tests.deploy.kustomize import CLUSTER_SCOPED
from tests.deploy.test_manifests import agent_container, validate

MATRIX = sorted(r.HELM_MATRIX)


@pytest.mark.parametrize("case", MATRIX)
def test_helm_lint_clean(case: str, tmp_path: Path) -> None:
    vf = tmp_path / "values.yaml"
    vf.write_text(yaml.safe_dump(r.HELM_MATRIX[case][0]))
    out = r.helm(
        "lint", "--strict", str(r.CHART), "--kube-version", r.HELM_KUBE_VERSION, "--values", str(vf)
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[ERROR]" not in out.stdout and "[WARNING]" not in out.stdout, out.stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


@pytest.mark.parametrize("case", MATRIX)
def test_helm_template_validates(case: str, tmp_path: Path) -> None:
    values, _ = r.HELM_MATRIX[case]
    objs = r.helm_template(values, tmp_path)
    kinds = [o["kind"] for o in objs]
    assert kinds.count("DaemonSet") == 1
    for o in objs:
        if o["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in o["metadata"], o["kind"]
        else:
            assert o["metadata"]["namespace"] == r.NAMESPACE, o["kind"]
        validate(o, objs)


@pytest.mark.parametrize("case", [c for c in MATRIX if r.HELM_MATRIX[c][1] is not None])
def test_helm_equals_kustomize(case: str, tmp_path: Path) -> None:
    values, subset = r.HELM_MATRIX[case]
    assert subset is not None
    helm_objs = r.helm_template(values, tmp_path / "h")
    kust = [o for o in r.render_subset(subset, tmp_path / "k") if o["kind"] != "Namespace"]
    kust_keys = {(o["kind"], o["metadata"]["name"]) for o in kust}
    # Helm's extra monitoring objects (ServiceMonitor and its Service, PrometheusRule) have
    # no kustomize component (deploy/monitoring carries the PrometheusRule); the admission
    # policy is in the nodefeature-api overlay, not a component (compared in the test below).
    extra = [o for o in helm_objs if (o["kind"], o["metadata"]["name"]) not in kust_keys]
    assert {o["kind"] for o in extra} <= {
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    shared = [o for o in helm_objs if (o["kind"], o["metadata"]["name"]) in kust_keys]
    assert r.normalized(shared) == r.normalized(kust)


def test_helm_defaults_equal_default_overlay(tmp_path: Path) -> None:
    """The README's one command and the chart's defaults install the same thing."""
    from tests.deploy.kustomize import build

    helm_objs = r.helm_template({}, tmp_path)
    kust = [o for o in build(r.DEPLOY / "overlays" / "nodefeature-api") if o["kind"] != "Namespace"]
    assert r.normalized(helm_objs) == r.normalized(kust)


def test_everything_case(tmp_path: Path) -> None:
    values, _ = r.HELM_MATRIX["everything"]
    objs = r.helm_template(values, tmp_path)
    by_kind = {o["kind"]: o for o in objs}
    assert by_kind["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == (
        "privileged"
    )
    c = agent_container(objs)
    assert "--rules=/etc/nfd-gpu/rules" in c["args"] and "--log-level=debug" in c["args"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NFD_GPU_OUTPUTS"] == "nodefeature,featurefile"
    assert env["NFD_GPU_MIG_STRATEGY"] == "mixed"
    assert env["NFD_GPU_SHARING_CONFIG"] == "/etc/nfd-gpu/sharing/config.yaml"
    cms = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    assert set(cms["nfd-gpu-rules"]["data"]) == {"extra.yaml"}
    assert "sharing" in cms["nfd-gpu-sharing"]["data"]["config.yaml"]
    spec = by_kind["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["affinity"] == values["affinity"]
    assert by_kind["PodMonitor"]["metadata"]["labels"]["release"] == "prom"
    assert by_kind["NodeFeatureRule"]["metadata"]["name"] == "gpu-present"


def test_rbac_only_with_nodefeature_output(tmp_path: Path) -> None:
    objs = r.helm_template({"outputs": ["featurefile"]}, tmp_path)
    kinds = {o["kind"] for o in objs}
    assert not {"Role", "RoleBinding", "ValidatingAdmissionPolicy"} & kinds
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    "values, error",
    [
        ({"migStrategy": "bogus"}, "/migStrategy"),
        ({"outputs": ["labels"]}, "/outputs/0"),
        ({"profiles": ["gfd"]}, "/profiles/0"),
        ({"gpuNodeLabels": ["10de"]}, "/gpuNodeLabels/0"),
        ({"typo": 1}, "typo"),
    ],
)
def test_schema_rejects_bad_values(values: dict[str, object], error: str, tmp_path: Path) -> None:
    vf = tmp_path / "v.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = r.helm("template", "x", str(r.CHART), "--values", str(vf))
    assert out.returncode != 0 and error in out.stderr, out.stderr


def test_schema_enums_are_the_agents() -> None:
    import json

    from nfd_gpu.config import OUTPUTS
    from nfd_gpu.labels.options import PROFILE_OPTIONS
    from nfd_gpu.labels.registry import PROFILES

    props = json.loads((r.CHART / "values.schema.json").read_text())["properties"]
    assert set(props["outputs"]["items"]["enum"]) == set(OUTPUTS)
    assert set(props["profiles"]["items"]["enum"]) == set(PROFILES)
    assert set(props["profileOptions"]["items"]["enum"]) == set(PROFILE_OPTIONS)


def test_prometheus_rules_match_deploy_monitoring() -> None:
    """The chart's PrometheusRule carries the alerts shipped in deploy/monitoring (or,
    before that exists, the ones docs/metrics-alerts.md documents)."""
    import re

    chart = yaml.safe_load((r.CHART / "files" / "prometheus-rules.yaml").read_text())
    manifest = r.DEPLOY / "monitoring" / "prometheusrule.yaml"
    if manifest.is_file():
        want = yaml.safe_load(manifest.read_text())["spec"]
    else:
        doc = (r.REPO / "docs" / "metrics-alerts.md").read_text()
        block = re.search(r"```yaml\n(.*?)```", doc, re.S)
        assert block
        want = yaml.safe_load(block.group(1))["spec"]
    assert chart == want


def test_readme_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(r.REPO / "scripts" / "helm_readme.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_admission_policy_follows_service_account_name(tmp_path: Path) -> None:
    """The policy matches the requests of the chart's own service account, whatever the
    release is called."""
    objs = r.helm_template({"fullnameOverride": "gpu-labels"}, tmp_path, release="x")
    (vap,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
    (binding,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    (sa,) = [o for o in objs if o["kind"] == "ServiceAccount"]
    assert sa["metadata"]["name"] == "gpu-labels"
    (cond,) = vap["spec"]["matchConditions"]
    assert cond["expression"].endswith("':gpu-labels'")
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]


def test_no_security_objects_when_disabled(tmp_path: Path) -> None:
    values = {"networkPolicy": {"enabled": False}, "admissionPolicy": {"enabled": False}}
    kinds = {o["kind"] for o in r.helm_template(values, tmp_path)}
    assert not {"NetworkPolicy", "ValidatingAdmissionPolicy"} & kinds
