"""deploy/helm/nfd-gpu: helm lint, helm template for each values set of HELM_MATRIX, every
object validated like the kustomize renderings, and the same objects as kustomize where
the two overlap (modulo Helm's standard labels)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nfd_gpu.config import loader as config
from nfd_gpu.labels.options import PROFILE_OPTIONS
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
    # kustomize keeps a Role that grants nothing (and its binding) where Helm renders none:
    # `kubectl apply -k` of another overlay replaces an object, never removes one; Helm
    # removes on upgrade what a release no longer renders
    empty = {"Role"} if any(o["kind"] == "Role" and not o.get("rules") for o in kust) else set()
    kust = [o for o in kust if o["kind"] not in empty | {"RoleBinding"} or not empty]
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
    # but for the cluster-scoped policy's name: the release's and namespace's, so that it
    # does not collide with kustomize's (or another release's)
    policy = f"{r.RELEASE}-{r.NAMESPACE}-own-nodefeature"
    for o in helm_objs:
        if o["kind"].startswith("ValidatingAdmissionPolicy"):
            assert o["metadata"]["name"] == policy
            o["metadata"]["name"] = "nfd-gpu-own-nodefeature"
            if "policyName" in o["spec"]:
                assert o["spec"]["policyName"] == policy
                o["spec"]["policyName"] = "nfd-gpu-own-nodefeature"
    assert r.normalized(helm_objs) == r.normalized(kust)


def test_admission_policy_unique_per_release_and_namespace(tmp_path: Path) -> None:
    """Two releases of one name in two namespaces (or the chart next to kustomize's
    nfd-gpu-own-nodefeature) name different cluster-scoped policies."""
    names = set()
    for ns in ("a", "b"):
        out = r.helm("template", "gpu", str(r.CHART), "-n", ns, "--kube-version",
                     r.HELM_KUBE_VERSION)  # fmt: skip
        assert out.returncode == 0, out.stderr
        objs = [d for d in yaml.safe_load_all(out.stdout) if d]
        (vap,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
        (binding,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"]
        assert (
            binding["metadata"]["name"] == binding["spec"]["policyName"] == vap["metadata"]["name"]
        )
        names.add(vap["metadata"]["name"])
    assert names == {"gpu-nfd-gpu-a-own-nodefeature", "gpu-nfd-gpu-b-own-nodefeature"}


def test_everything_case(tmp_path: Path) -> None:
    values, _ = r.HELM_MATRIX["everything"]
    objs = r.helm_template(values, tmp_path)
    by_kind = {o["kind"]: o for o in objs}
    assert "Namespace" not in by_kind  # Helm keeps its release there: made before (install.md)
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
    values = {"outputs": ["featurefile"], "nodeFeatureCleanup": False}
    objs = r.helm_template(values, tmp_path)
    kinds = {o["kind"] for o in objs}
    assert not {"Role", "RoleBinding", "ValidatingAdmissionPolicy"} & kinds
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False


def test_featurefile_output_may_only_remove_its_old_nodefeature(tmp_path: Path) -> None:
    """Without the nodefeature output (the default nodeFeatureCleanup), the agent may get and
    delete NodeFeatures and nothing else (the admission policy: only its own node's)."""
    objs = r.helm_template({"outputs": ["featurefile"]}, tmp_path)
    from tests.deploy.test_manifests import REQUEST_VERBS, source_requests

    (role,) = [o for o in objs if o["kind"] == "Role"]
    assert role["rules"] == [
        {
            "apiGroups": ["nfd.k8s-sigs.io"],
            "resources": ["nodefeatures"],
            "verbs": ["get", "delete"],
        }
    ]
    # exactly the requests of the removal (the nodefeature output's retire)
    src = (r.REPO / "nfd_gpu" / "sinks" / "nodefeature_stale.py").read_text()
    calls = set(source_requests(src))
    assert {REQUEST_VERBS[c][2] for c in calls} == set(role["rules"][0]["verbs"])
    assert {"RoleBinding", "ValidatingAdmissionPolicy"} <= {o["kind"] for o in objs}
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert "automountServiceAccountToken" not in spec


@pytest.mark.parametrize(
    "values, error",
    [
        ({"migStrategy": "bogus"}, "/migStrategy"),
        ({"outputs": ["labels"]}, "/outputs/0"),
        ({"profiles": ["gfd"]}, "/profiles/0"),
        ({"gpuNodeLabels": ["10de"]}, "/gpuNodeLabels/0"),
        ({"typo": 1}, "typo"),
        # gone: Helm stores the release in its namespace before it creates any object
        ({"createNamespace": True}, "createNamespace"),
    ],
)
def test_schema_rejects_bad_values(values: dict[str, object], error: str, tmp_path: Path) -> None:
    vf = tmp_path / "v.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = r.helm("template", "x", str(r.CHART), "--values", str(vf))
    assert out.returncode != 0 and error in out.stderr, out.stderr


def test_schema_enums_are_the_agents() -> None:
    """The chart's enums are written from the registries (scripts/chart_schema.py)."""
    import json

    from nfd_gpu.config.settings import SETTINGS
    from nfd_gpu.labels.options import PROFILE_OPTIONS
    from nfd_gpu.labels.registry import PROFILES
    from nfd_gpu.sinks.registry import OUTPUTS

    check = subprocess.run(
        [sys.executable, str(r.REPO / "scripts" / "chart_schema.py"), "--check"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(r.REPO)},
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    props = json.loads((r.CHART / "values.schema.json").read_text())["properties"]
    # a deprecated output (hook: stdout, nothing reads it in a pod) is not offered
    offered = {name for name, o in OUTPUTS.items() if not o.deprecated}
    assert set(props["outputs"]["items"]["enum"]) == offered
    assert set(props["profiles"]["items"]["enum"]) == set(PROFILES)
    assert set(props["profileOptions"]["items"]["enum"]) == set(PROFILE_OPTIONS)
    # the `config` file takes every setting (the health_* ones were refused by the chart)
    assert set(props["config"]["propertyNames"]["enum"]) == set(SETTINGS)


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


def test_monitors_put_the_node_on_every_series(tmp_path: Path) -> None:
    """PodMonitor and ServiceMonitor relabel the pod's node name to ``node`` (the alerts
    are keyed by node: tests/monitoring/test_monitoring.py)."""
    from tests.monitoring.test_monitoring import NODE_RELABELING

    objs = r.helm_template(r.HELM_MATRIX["monitoring"][0], tmp_path)
    pm = next(o for o in objs if o["kind"] == "PodMonitor")
    sm = next(o for o in objs if o["kind"] == "ServiceMonitor")
    eps = pm["spec"]["podMetricsEndpoints"] + sm["spec"]["endpoints"]
    for ep in eps:
        assert NODE_RELABELING in ep["relabelings"], ep


@pytest.mark.parametrize("helm", r.HELMS)
@pytest.mark.parametrize(
    "values, error",
    [
        (
            {"outputs": ["featurefile"], "interval": 400, "featureFile": {"expiry": 600}},
            "featureFile.expiry (600s) must be at least twice interval (400s)",
        ),
        ({"profileOptions": ["amd-beta"]}, "profileOptions: amd-beta needs the amd profile"),
        ({"config": {"interval": 5}}, "config.interval: the chart sets interval itself"),
        ({"config": {"rules": "/x"}}, "config.rules: the chart sets rules itself"),
        (
            {"config": {"log_level": "debug"}, "logLevel": "info"},
            "config.log_level: the chart sets log_level itself",
        ),
        ({"config": {"no_such_key": 1}}, "config"),
        ({"image": {"digest": "latest"}}, "/image/digest"),
    ],
)
def test_cross_field_checks_fail_template(
    helm: str, values: dict[str, object], error: str, tmp_path: Path
) -> None:
    """What the agent refuses at start (nfd_gpu/config/loader.py) fails ``helm template``, not the
    pod (a crash loop); with Helm 3 and Helm 4."""
    vf = tmp_path / "v.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = r.helm("template", "x", str(r.CHART), "--values", str(vf), binary=helm)
    assert out.returncode != 0 and error in out.stderr, out.stderr


def test_cross_field_checks_are_the_agents(tmp_path: Path) -> None:
    """The values the chart refuses, given to the agent itself, are refused too (and the
    chart's boundary, expiry = 2 x interval, is accepted by both)."""
    from nfd_gpu.config.loader import ConfigError, load

    env = {"NODE_NAME": "n", "POD_NAMESPACE": "ns"}
    with pytest.raises(ConfigError, match="at least twice the interval"):
        load(env=env, flags={"outputs": "featurefile", "interval": 400, "expiry": 600})
    with pytest.raises(ConfigError, match="needs the amd profile"):
        load(env=env, flags={"profile_options": "amd-beta"})
    load(env=env, flags={"outputs": "featurefile", "interval": 300, "expiry": 600})
    values = {"outputs": ["featurefile"], "interval": 300, "featureFile": {"expiry": 600}}
    assert r.helm_template(values, tmp_path)
    for option in PROFILE_OPTIONS:  # the chart takes an option's profile from its prefix
        assert option.split("-")[0] == PROFILE_OPTIONS[option][0]


def test_new_values_render(tmp_path: Path) -> None:
    """image.digest, serviceAccount.annotations and the agent's own config file."""
    digest = "sha256:" + "ab" * 32
    values = {
        "image": {"digest": digest, "tag": "ignored"},
        "outputs": ["nodefeature", "featurefile"],
        "serviceAccount": {"annotations": {"iam.example.com/role": "gpu"}},
        "config": {"api_timeout": 5, "owner_refs": ["pod"]},
    }
    objs = r.helm_template(values, tmp_path)
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]
    images = {c["image"] for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]}
    assert images == {f"ghcr.io/nfd-gpu/nfd-gpu@{digest}"}
    (sa,) = [o for o in objs if o["kind"] == "ServiceAccount"]
    assert sa["metadata"]["annotations"] == {"iam.example.com/role": "gpu"}
    cm = next(
        o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config")
    )
    path = "/etc/nfd-gpu/config/config.yaml"
    c = agent_container(objs)
    assert {"name": "NFD_GPU_CONFIG", "value": path} in c["env"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "config"]
    assert mount["mountPath"] == "/etc/nfd-gpu/config"
    assert "checksum/config" in pod["metadata"]["annotations"]
    # the file the agent gets is one it loads, with the chart's own settings on top
    (tmp_path / "config.yaml").write_text(cm["data"]["config.yaml"])
    from nfd_gpu.config.loader import load

    cfg = load(str(tmp_path / "config.yaml"), env={"NODE_NAME": "n", "POD_NAMESPACE": "ns"})
    assert cfg.api_timeout == 5 and cfg.owner_refs == ("pod",)


@pytest.mark.parametrize("case", MATRIX)
def test_helm4_renders_what_helm3_renders(case: str, tmp_path: Path) -> None:
    """The chart is Helm-4 ready: the same objects from both majors, and lint clean."""
    values, _ = r.HELM_MATRIX[case]
    h3 = r.helm_template(values, tmp_path / "3")
    h4 = r.helm_template(values, tmp_path / "4", binary="helm4")
    assert h4 == h3
    vf = tmp_path / "values.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = r.helm("lint", "--strict", str(r.CHART), "--kube-version", r.HELM_KUBE_VERSION,
                 "--values", str(vf), binary="helm4")  # fmt: skip
    assert out.returncode == 0 and "[ERROR]" not in out.stdout, out.stdout + out.stderr
    assert "[WARNING]" not in out.stdout, out.stdout


def test_config_example_is_a_valid_configuration(tmp_path: Path) -> None:
    # the `config` value's example in values.yaml (and so the chart's README) is a file
    # the agent accepts: `owner_refs: [daemonset]` was refused (the kinds are pod, ds)
    text = (r.CHART / "values.yaml").read_text()
    block = text[: text.index("\nconfig:")].rsplit("# --", 1)[1]
    example = re.search(r"e\.g\. `(\{.*?\})`", " ".join(block.replace("#", " ").split()))
    assert example is not None, block
    f = tmp_path / "config.yaml"
    f.write_text(example.group(1))
    config.load(str(f), env={})


def test_global_image_pull_secrets_are_honoured(tmp_path: Path) -> None:
    """A parent chart's ``global.imagePullSecrets`` (names or ``{name: ...}``) first, then
    the chart's own, each name once."""
    values = {
        "global": {"imagePullSecrets": ["mirror", {"name": "regcred"}]},
        "imagePullSecrets": [{"name": "regcred"}, {"name": "own"}],
    }
    objs = r.helm_template(values, tmp_path)
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "mirror"}, {"name": "regcred"}, {"name": "own"}]
    objs = r.helm_template({}, tmp_path / "none")
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert "imagePullSecrets" not in spec
