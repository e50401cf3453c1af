"""deploy/: render every overlay, validate every object, check flags/env and RBAC.

Rendering uses tests/deploy/kustomize.py (no kubectl needed); when ``kubectl`` is on PATH
the same overlays are also rendered with ``kubectl kustomize`` and must agree.
Core kinds are validated with ``kubernetes-validate`` (offline JSON schemas, strict:
unknown fields fail); NodeFeatureRule against NFD's CRD schema with ``jsonschema``.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer

from tests.deploy.kustomize import CLUSTER_SCOPED, build, load_docs

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
EXAMPLES = sorted((DEPLOY / "examples").glob("*.yaml"))
NFD_CRDS = REPO / "tests" / "data" / "nfd" / "nfd-api-crds.yaml"
K8S_VERSION = "1.30.0"  # oldest Kubernetes the manifests target

Obj = dict[str, Any]

# What nfd_gpu/sinks/nodefeature.py needs, by (apiGroup, resource): the RBAC verb of each
# request it makes (kubeclient.request / ObjectClient._send: method and path).
# test_rbac_matches_sink re-derives this from the sink's source so a new request fails
# here until the Role and this set are updated.
NODEFEATURES = ("nfd.k8s-sigs.io", "nodefeatures")
REQUEST_VERBS = {
    ("GET", "OBJECT_PATH"): (*NODEFEATURES, "get"),
    ("GET", "COLLECTION_PATH"): (*NODEFEATURES, "list"),
    ("POST", "COLLECTION_PATH"): (*NODEFEATURES, "create"),
    ("PUT", "OBJECT_PATH"): (*NODEFEATURES, "update"),
    ("PATCH", "OBJECT_PATH"): (*NODEFEATURES, "patch"),
    ("DELETE", "OBJECT_PATH"): (*NODEFEATURES, "delete"),
    ("GET", "/api/v1/namespaces/{namespace}/pods/{name}"): ("", "pods", "get"),
}
SINK_NEEDS = {
    ("nfd.k8s-sigs.io", "nodefeatures"): {"get", "create", "patch", "update", "watch"},
    ("", "pods"): {"get"},
}


def render(overlay: str) -> list[Obj]:
    return build(DEPLOY / "overlays" / overlay)


def agent_container(objs: list[Obj]) -> Obj:
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nfd-gpu"]
    return c


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders(overlay: str) -> None:
    objs = render(overlay)
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "ServiceAccount", "DaemonSet"} <= kinds
    assert "PodMonitor" not in kinds  # the monitoring component, needs the operator's CRDs
    for o in objs:
        assert o.get("apiVersion") and o.get("metadata", {}).get("name"), o
        if o["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in o["metadata"], o["kind"]
        else:
            assert o["metadata"].get("namespace") == "nfd-gpu", o["kind"]


def test_overlays_present() -> None:
    assert set(OVERLAYS) == {"nodefeature-api", "nfd-worker-sidecar", "nvml", "compat"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_python_renderer_matches_kustomize(overlay: str) -> None:
    """The real kustomize (tests/e2e/build-tools.sh; a failure in CI when missing)."""
    from tests.deploy import renderings

    def key(o: Obj) -> tuple[str, str]:
        return (o["kind"], o["metadata"]["name"])

    theirs = sorted(renderings.kustomize_real(DEPLOY / "overlays" / overlay), key=key)
    assert sorted(render(overlay), key=key) == theirs


def _validate_core(obj: Obj) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(obj, K8S_VERSION, strict=True)


def _crd_schemas() -> dict[str, Obj]:
    out = {}
    for crd in load_docs(NFD_CRDS):
        kind = crd["spec"]["names"]["kind"]
        (ver,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
        out[kind] = ver["schema"]["openAPIV3Schema"]
    return out


def _check_monitoring(pm: Obj, objs: list[Obj]) -> None:
    """Structural check (no schema shipped offline for monitoring.coreos.com): the
    PodMonitor selects the agent's pods and port; the ServiceMonitor its Service, whose
    selector and target port are the agent's; a PrometheusRule has alert groups."""
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for p in agent_container(objs)["ports"]}
    if pm["kind"] == "PrometheusRule":
        assert set(pm["spec"]) == {"groups"}
        assert all(
            rule["alert"] and rule["expr"] for g in pm["spec"]["groups"] for rule in g["rules"]
        )
        return
    if pm["kind"] == "PodMonitor":
        assert set(pm["spec"]) <= {"selector", "podMetricsEndpoints", "namespaceSelector"}
        assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        endpoints = pm["spec"]["podMetricsEndpoints"]
    else:
        assert pm["kind"] == "ServiceMonitor", pm["kind"]
        assert set(pm["spec"]) <= {"selector", "endpoints", "namespaceSelector"}
        (svc,) = [
            o
            for o in objs
            if o["kind"] == "Service"
            and pm["spec"]["selector"]["matchLabels"].items() <= o["metadata"]["labels"].items()
        ]
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
        endpoints = pm["spec"]["endpoints"]
        for ep in endpoints:
            assert svc_ports[ep["port"]]["targetPort"] in ports
        ports = set(svc_ports)
    for ep in endpoints:
        assert ep["port"] in ports
        assert ep.get("path", "/metrics") == "/metrics"


def validate(obj: Obj, objs: list[Obj]) -> None:
    group = obj["apiVersion"].rpartition("/")[0]
    if group == "nfd.k8s-sigs.io":
        schema = _crd_schemas()[obj["kind"]]
        jsonschema.validate(obj, schema)
    elif group == "monitoring.coreos.com":
        _check_monitoring(obj, objs)
    else:
        _validate_core(obj)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_objects_validate(overlay: str) -> None:
    objs = render(overlay)
    for o in objs:
        validate(o, objs)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate(path: Path) -> None:
    docs = load_docs(path)
    assert docs
    for d in docs:
        validate(d, docs)


def test_example_rules_check() -> None:
    from typer.testing import CliRunner

    from nfd_gpu.cli import app

    res = CliRunner().invoke(app, ["rules", "check", str(DEPLOY / "examples")])
    assert res.exit_code == 0, res.output


def test_example_affinity_uses_documented_labels() -> None:
    labels_md = (REPO / "docs" / "labels.md").read_text()
    documented = set(re.findall(r"`G/([^`]+)`", labels_md))
    # keys with <placeholders> become patterns
    patterns = [
        re.compile(
            re.sub(r"<[^>]+>", r"[^/]+", re.escape(k).replace(r"\<", "<").replace(r"\>", ">")) + "$"
        )
        for k in documented
    ]
    rule_labels = set()
    for doc in load_docs(REPO / "rules" / "intel-datacenter.yaml"):
        for r in doc["spec"]["rules"]:
            rule_labels.update(r.get("labels", {}))
    for job in load_docs(DEPLOY / "examples" / "workloads.yaml"):
        terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        for t in terms:
            for e in t["matchExpressions"]:
                key = e["key"]
                ns, _, name = key.partition("/")
                assert ns == "gpu.feature.node.kubernetes.io", key
                assert key in rule_labels or any(p.match(name) for p in patterns), key


# -- security and shape of the DaemonSet -----------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonset_least_privilege(overlay: str) -> None:
    objs = render(overlay)
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    c = agent_container(objs)
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
    assert not sc.get("privileged")
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    # every overlay's agent runs without root (the sidecar overlay's features.d is made
    # group-writable by a one-shot init container holding only CAP_CHOWN)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert not sc.get("runAsUser")  # no per-container override back to root
    for init in spec.get("initContainers", []):
        isc = init["securityContext"]
        assert isc["capabilities"]["drop"] == ["ALL"]
        assert set(isc["capabilities"].get("add", [])) <= {"CHOWN"}
        assert isc["allowPrivilegeEscalation"] is False and isc["readOnlyRootFilesystem"] is True
        assert [m["name"] for m in init["volumeMounts"]] == ["features-d"]
        assert init["image"] == c["image"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert {"/sys", "/proc/driver", "/usr/share", "/usr/lib"} <= set(host.values())
    # nothing is created on the host (only the feature file's own directory),
    # and not the whole /usr (its /usr/bin holds the host's shells)
    assert all(
        v["hostPath"].get("type") != "DirectoryOrCreate"
        for v in spec["volumes"]
        if "hostPath" in v
        and v["hostPath"]["path"] != "/etc/kubernetes/node-feature-discovery/features.d"
    )
    # no whole /dev (read-only does not apply to device nodes), never the host's /
    assert not {"/", "/dev", "/etc", "/var", "/run", "/opt", "/usr", "/usr/bin"} & set(
        host.values()
    )
    assert not any(p.startswith("/dev/") for p in host.values())
    for m in c["volumeMounts"]:
        if (
            m["name"] in host
            and host[m["name"]] != "/etc/kubernetes/node-feature-discovery/features.d"
        ):
            assert m.get("readOnly") is True, m
            assert m["mountPath"] == "/host" + host[m["name"]]
    assert "--root=/host" in c["args"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["httpGet"]["path"] == "/startedz"
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) <= set(c["resources"]["limits"])
    env = {e["name"]: e for e in c["env"]}
    for var, field in [
        ("NODE_NAME", "spec.nodeName"),
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_UID", "metadata.uid"),
    ]:
        assert env[var]["valueFrom"]["fieldRef"]["fieldPath"] == field
    tol = {(t["key"], t["operator"], t["effect"]) for t in spec["tolerations"]}
    # the device plugins' GPU taints, and its own health taint (a pod deleted on a node it
    # tainted must start again there, or the taint never goes: tests/node/test_health.py)
    own = "gpu.feature.node.kubernetes.io/unhealthy"
    for key in ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", own):
        assert (key, "Exists", "NoSchedule") in tol


def test_overlay_specifics() -> None:
    nvml = {e["name"]: e.get("value") for e in agent_container(render("nvml"))["env"]}
    assert nvml["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert nvml["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    sidecar = render("nfd-worker-sidecar")
    (role,) = [o for o in sidecar if o["kind"] == "Role"]
    assert role["rules"] == []  # no API access; the name kept for overlay switches
    env = {e["name"]: e.get("value") for e in agent_container(sidecar)["env"]}
    assert env["NFD_GPU_OUTPUTS"] == "featurefile"
    env = {e["name"]: e.get("value") for e in agent_container(render("nodefeature-api"))["env"]}
    assert env["NFD_GPU_OUTPUTS"] == "nodefeature"


# -- flags and env against the CLI -----------------------------------------------------


def _manifest_args_env() -> tuple[set[str], set[str]]:
    flags: set[str] = set()
    envs: set[str] = set()
    for overlay in OVERLAYS:
        c = agent_container(render(overlay))
        assert c.get("command") is None, "the image's entrypoint is `nfd-gpu run`"
        for a in c.get("args", []):
            assert a.startswith("--"), a
            flags.add(a.split("=", 1)[0])
        envs.update(e["name"] for e in c.get("env", []) if e["name"].startswith("NFD_GPU_"))
    return flags, envs


def _options(command_name: str) -> dict[str, Any] | None:
    from nfd_gpu.cli import app

    group: Any = typer.main.get_command(app)
    cmd = group.get_command(None, command_name)  # built when named, as by a command line
    if cmd is None:
        return None
    out = {}
    for p in cmd.params:
        for o in list(getattr(p, "opts", [])) + list(getattr(p, "secondary_opts", [])):
            out[o] = p
    return out


def test_flags_shared_with_scan_exist() -> None:
    """The flags `scan` shares with `run` (--root, --rules) are `scan`'s too, same env var."""
    scan = _options("scan")
    assert scan is not None
    flags, _ = _manifest_args_env()
    for f in flags & {"--root", "--rules"}:
        assert f in scan, f
    assert scan["--root"].envvar == "NFD_GPU_ROOT"


def test_flags_exist_in_run() -> None:
    run = _options("run")
    assert run is not None
    flags, _ = _manifest_args_env()
    missing = sorted(f for f in flags if f not in run)
    assert not missing, f"flags in deploy/ that `nfd-gpu run` lacks: {missing}"


def test_env_exists_in_config() -> None:
    from nfd_gpu.config import loader as config

    _, envs = _manifest_args_env()
    for var in envs:
        assert var[len("NFD_GPU_") :].lower() in config.KEYS, var
    std = set(config.STANDARD_ENV)
    assert {"NODE_NAME", "POD_NAME", "POD_NAMESPACE", "POD_UID"} <= std


def test_compat_profiles_exist() -> None:
    from nfd_gpu.labels.registry import PROFILES

    env = {e["name"]: e.get("value") for e in agent_container(render("compat"))["env"]}
    wanted = env["NFD_GPU_PROFILES"].split(",")
    assert set(wanted) <= set(PROFILES)
    assert set(PROFILES) <= set(wanted), "compat should switch every profile on"


# -- RBAC against the NodeFeature sink -------------------------------------------------


def _role_rules(objs: list[Obj]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for o in objs:
        if o["kind"] == "Role":
            for r in o["rules"]:
                for g in r["apiGroups"]:
                    for res in r["resources"]:
                        out.setdefault((g, res), set()).update(r["verbs"])
    return out


def test_role_is_what_the_sink_needs() -> None:
    objs = render("nodefeature-api")
    assert _role_rules(objs) == SINK_NEEDS
    (rb,) = [o for o in objs if o["kind"] == "RoleBinding"]
    assert rb["roleRef"]["name"] == "nfd-gpu"
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "nfd-gpu", "namespace": "nfd-gpu"}]


def source_requests(src: str) -> list[tuple[str, str]]:
    """(method, path) of each request in a module's source: the calls of ``request`` and
    ``_send`` (method and path their 2nd and 3rd arguments: a string, or the name of
    kubeclient's path constants); a call that passes its own function's parameters on
    (``_send``, ``get_raw``) is skipped; any other is an error."""
    found = []
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and len(node.args) >= 3):
                continue
            f = node.func
            name = getattr(f, "id", None) or getattr(f, "attr", "")
            if name not in ("request", "_send"):
                continue
            args = node.args[1:3]
            if any(isinstance(a, ast.Name) and a.id in params for a in args):
                continue  # passing its own parameters on
            method, path = (getattr(a, "value", None) or getattr(a, "id", None) for a in args)
            assert isinstance(method, str) and isinstance(path, str), ast.unparse(node)
            found.append((method, path))
    return found


def test_rbac_matches_sink() -> None:
    needs: dict[tuple[str, str], set[str]] = {}
    # the sink, its transport (kubeclient: the own Pod's GET) and its watch (whose list
    # request is a watch: watch=true)
    for module, watch in (
        ("nfd_gpu.sinks.kubeclient", False),
        ("nfd_gpu.sinks.nodefeature", False),
        ("nfd_gpu.sinks.nodefeature_watch", True),
    ):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        src = Path(spec.origin).read_text()
        calls = source_requests(src)
        unknown = set(calls) - set(REQUEST_VERBS)
        assert not unknown, f"new requests in the sink, map them to RBAC verbs: {unknown}"
        if watch:
            assert 'watch="true"' in src
        for call in calls:
            g, res, verb = REQUEST_VERBS[call]
            needs.setdefault((g, res), set()).add("watch" if watch and verb == "list" else verb)
    assert needs == SINK_NEEDS


# -- image ------------------------------------------------------------------------------


def test_dockerfile() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.12-slim", text, re.M)
    assert re.search(r'^ENTRYPOINT \["nfd-gpu", "run"\]', text, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    # --rules in deploy/ points at the rules the image copies from rules/
    m = re.search(r"^COPY rules/\*\.yaml (\S+)/$", text, re.M)
    assert m, "Dockerfile must copy rules/*.yaml"
    for overlay in OVERLAYS:
        assert f"--rules={m.group(1)}" in agent_container(render(overlay))["args"]
    # every base pinned by digest; locked, hashed dependencies; no pip in the final image
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", f) for f in froms), froms
    installs = re.findall(r"pip install [^\n]*", text)
    for line in installs:
        assert "--require-hashes" in line or "--no-deps" in line, line
    final = text[text.rindex("\nFROM ") :]
    assert "pip uninstall -y pip" in final and "pip install" not in final
    assert "COPY --from=build /opt/nfd-gpu /opt/nfd-gpu" in final
    # the runtime writes no bytecode, so what the build leaves uncompiled is compiled at
    # every start: the venv is byte-compiled after its last install (hash-based .pyc)
    build = text[: text.rindex("\nFROM ")]
    assert "PYTHONDONTWRITEBYTECODE=1" in final
    after = build[build.rindex("pip install") :]
    compiled = r"python -m compileall [^\n]*--invalidation-mode checked-hash /opt/nfd-gpu\b"
    assert re.search(compiled, after), "the build stage must byte-compile /opt/nfd-gpu last"
    # the locks themselves: tests/test_locks.py
    ignore = (REPO / ".dockerignore").read_text().split()
    assert "rules" not in ignore
    for entry in (".venv", ".git", "tests/fixtures"):
        assert entry in ignore


# -- what the agent publishes, against the CRD and the example workloads ---------------

FIXTURES = REPO / "tests" / "fixtures" / "sysfs"


def _published(fixture: str) -> Obj:
    from nfd_gpu.scan import run_scan
    from nfd_gpu.sinks import Publication
    from nfd_gpu.sinks.nodefeature import NodeFeatureSink

    res = run_scan(FIXTURES / fixture, rules_path=REPO / "rules")
    sink = NodeFeatureSink(node_name=fixture, namespace="nfd-gpu", owner_refs=())
    return sink.desired(Publication(labels=res.labels, features=res.features))


def _selects(job: Obj, labels: dict[str, str]) -> bool:
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]

    def ok(e: Obj) -> bool:
        v = labels.get(e["key"])
        if e["operator"] == "In":
            return v in e["values"]
        if e["operator"] == "Gt":
            return v is not None and v.isdigit() and int(v) > int(e["values"][0])
        raise AssertionError(f"operator {e['operator']} not handled by this test")

    return any(all(ok(e) for e in t["matchExpressions"]) for t in terms)


@pytest.mark.parametrize(
    ("fixture", "jobs"),
    [
        ("hgx-h100", {"train-hopper-or-blackwell", "big-memory-inference"}),
        ("flex170-sriov", {"intel-datacenter"}),
        ("mi210-8x", {"big-memory-inference"}),  # 64 GB; gfx90a, not gfx942
        ("workstation-rtx4090", set()),
        ("h100-mig-single", {"train-hopper-or-blackwell", "big-memory-inference", "mig-1g-10gb"}),
        ("dgx-a100-mig-mixed", {"big-memory-inference"}),  # 1g.5gb profiles, not 1g.10gb
        ("a100-t4", set()),  # family mixed, smallest GPU 15 GiB
    ],
)
def test_published_nodefeature_valid_and_examples_select(fixture: str, jobs: set[str]) -> None:
    obj = _published(fixture)
    jsonschema.validate(obj, _crd_schemas()["NodeFeature"])
    assert obj["metadata"]["name"] == f"nfd-gpu-{fixture}"
    labels = obj["spec"]["labels"]
    selected = {
        j["metadata"]["name"]
        for j in load_docs(DEPLOY / "examples" / "workloads.yaml")
        if _selects(j, labels)
    }
    assert selected == jobs, labels


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("hgx-h100", {"tier": "frontier", "fp8": "true"}),
        ("workstation-rtx4090", {"fp8": "true"}),  # Ada, compute capability 8.9
        ("mi210-8x", {}),  # gfx90a
        ("flex170-sriov", {}),
    ],
)
def test_example_rules_on_fixtures(fixture: str, expected: dict[str, str]) -> None:
    from nfd_gpu.scan import run_scan

    res = run_scan(FIXTURES / fixture, rules_path=DEPLOY / "examples" / "nodefeaturerules.yaml")
    prefix = "gpu.feature.node.kubernetes.io/"
    got = {
        k[len(prefix) :]: v
        for k, v in res.labels.items()
        if k[len(prefix) :] in {"tier", "fp8", "rocm.gfx942"}
    }
    assert got == expected
    assert not res.rule_errors


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_manifest_settings_load(overlay: str) -> None:
    """The values the manifests pass are accepted by the agent's config loader."""
    from nfd_gpu.config import loader as config

    c = agent_container(render(overlay))
    downward = {"NODE_NAME": "node-1", "POD_NAME": "nfd-gpu-x", "POD_NAMESPACE": "nfd-gpu"}
    downward["POD_UID"] = "0000"
    env = {e["name"]: e.get("value", downward.get(e["name"], "")) for e in c["env"]}
    env = {k: v for k, v in env.items() if k.startswith("NFD_GPU_") or k in downward}
    flags: dict[str, Any] = {}
    for a in c["args"]:
        name, eq, value = a[2:].partition("=")
        key = {"output": "outputs", "profile": "profiles"}.get(name, name.replace("-", "_"))
        flags[key] = value if eq else True
    cfg = config.load(None, env=env, flags=flags)
    assert cfg.node_name == "node-1" and cfg.root == "/host"
    assert cfg.metrics_address.endswith(":8081")


def test_docs_cover_deploy() -> None:
    install = (REPO / "docs" / "install.md").read_text()
    for overlay in OVERLAYS:
        assert f"`{overlay}`" in install or f"deploy/overlays/{overlay}" in install, overlay
    assert "kubectl apply -k deploy/overlays/nodefeature-api" in install
    assert re.search(r"kubectl apply -k '?https://\S+//deploy/overlays/nodefeature-api", install)
    # The README's quick start carries the one-command cluster install.
    assert "kubectl apply -k deploy/overlays/nodefeature-api" in (REPO / "README.md").read_text()
    for doc in ("troubleshooting.md", "migration.md", "metrics-alerts.md"):
        assert (REPO / "docs" / doc).is_file(), doc
    alerts = (REPO / "docs" / "metrics-alerts.md").read_text()
    metrics = set(re.findall(r"`(nfd_gpu_[a-z_]+)`", (REPO / "docs" / "metrics.md").read_text()))
    used = set(re.findall(r"\b(nfd_gpu_[a-z_]+?)(?:_bucket)?\b", alerts))
    assert used and used <= metrics, used - metrics
