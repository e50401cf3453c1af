"""Every way deploy/ can be rendered: kustomize overlays, every subset of the kustomize
components, and the Helm chart for a matrix of values (rendered by the real ``helm``).

The real tools come from ``tests/e2e/build-tools.sh`` (tests/e2e/bin/) or PATH. A missing
tool skips its tests locally and FAILS them in CI (``CI`` set), so CI cannot pass without
having run them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.kustomize import build

Obj = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "nfd-gpu"
BIN = REPO / "tests" / "e2e" / "bin"
COMPONENTS = sorted(p.name for p in (DEPLOY / "components").iterdir() if p.is_dir())
SUBSETS = [c for n in range(len(COMPONENTS) + 1) for c in itertools.combinations(COMPONENTS, n)]
RELEASE = "nfd-gpu"
NAMESPACE = "nfd-gpu"
HELM_KUBE_VERSION = "1.30.0"  # oldest Kubernetes the chart targets (Chart.yaml kubeVersion)

# The chart's values matrix (its defaults, each option alone, everything at once), each with
# the kustomize components that render the same objects (None: no kustomize equivalent).
HELM_MATRIX: dict[str, tuple[Obj, tuple[str, ...] | None]] = {
    "defaults": ({}, ("gpu-nodes-only",)),
    "nvml": ({"nvml": {"enabled": True}}, ("gpu-nodes-only", "nvml")),
    "compat": (
        {"profiles": ["neutral", "nvidia", "amd", "intel"], "profileOptions": ["amd-beta"]},
        ("compat", "gpu-nodes-only"),
    ),
    # the worker-sidecar component has no API access at all: nor the chart's removal of a
    # NodeFeature an earlier nodefeature output left (nodeFeatureCleanup)
    "featurefile-sidecar": (
        {"outputs": ["featurefile"], "nodeFeatureCleanup": False},
        ("gpu-nodes-only", "worker-sidecar"),
    ),
    "monitoring": (
        {
            "podMonitor": {"enabled": True},
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
        },
        ("gpu-nodes-only", "monitoring"),
    ),
    "no-gpu-affinity": ({"gpuNodesOnly": False}, ()),
    "host-runtime-config": (
        {"hostRuntimeConfig": {"cdi": True, "opencl": True, "nvidiaToolkit": True}},
        ("gpu-nodes-only", "host-runtime-config"),
    ),
    "everything": (
        {
            "outputs": ["nodefeature", "featurefile"],
            "profiles": ["neutral", "nvidia"],
            "migStrategy": "mixed",
            "logLevel": "debug",
            "nvml": {"enabled": True},
            "rules": {
                "files": {
                    "extra.yaml": (REPO / "deploy" / "examples" / "nodefeaturerules.yaml")
                    .read_text()
                    .split("\n---", 1)[0]
                }
            },
            "nodeFeatureRules": [
                {
                    "name": "gpu-present",
                    "spec": {
                        "rules": [
                            {
                                "name": "any gpu",
                                "labels": {"example.com/has-gpu": "true"},
                                "matchFeatures": [
                                    {
                                        "feature": "gpu.device",
                                        "matchExpressions": {"vendor": {"op": "Exists"}},
                                    }
                                ],
                            }
                        ]
                    },
                }
            ],
            "sharing": {"config": "version: v1\nsharing:\n  timeSlicing:\n    resources: []\n"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node-role.kubernetes.io/gpu", "operator": "Exists"}
                                ]
                            }
                        ]
                    }
                }
            },
            "extraVolumes": [{"name": "scratch", "emptyDir": {}}],
            "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "extraEnv": [{"name": "NFD_GPU_API_TIMEOUT", "value": "5"}],
            "podMonitor": {"enabled": True, "labels": {"release": "prom"}},
        },
        None,
    ),
}

# Labels only Helm adds (its standard ones); everything else must equal kustomize's.
HELM_ONLY_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
}


def tool(name: str) -> str:
    """The real tool's path; skip (locally) or fail (CI) when it is not built."""
    p = BIN / name
    if p.is_file() and os.access(p, os.X_OK):
        return str(p)
    found = shutil.which(name)
    if found:
        return found
    missing(f"{name} not found in {BIN} or PATH (run: bash tests/e2e/build-tools.sh)")
    raise AssertionError("unreachable")


def missing(msg: str) -> None:
    """Something built by tests/e2e/build-tools.sh is absent: fail in CI, skip locally."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(msg)
    pytest.skip(msg)


def subset_dir(subset: tuple[str, ...], where: Path) -> Path:
    """A kustomization in ``where`` with the base and ``subset``'s components, as a user
    would write it."""
    where.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(DEPLOY, where)
    k = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{rel}/base"],
        "components": [f"{rel}/components/{c}" for c in subset],
    }
    (where / "kustomization.yaml").write_text(yaml.safe_dump(k, sort_keys=False))
    return where


def render_subset(subset: tuple[str, ...], where: Path) -> list[Obj]:
    return build(subset_dir(subset, where))


def kustomize_real(directory: Path) -> list[Obj]:
    out = subprocess.run(
        [tool("kustomize"), "build", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# Helm 3 (helm) and Helm 4 (helm4), both built by tests/e2e/build-tools.sh.
HELMS = ("helm", "helm4")


def helm(*args: str, binary: str = "helm") -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool(binary), *args], capture_output=True, text=True, timeout=120)


def helm_template(
    values: Obj, where: Path, release: str = RELEASE, binary: str = "helm"
) -> list[Obj]:
    where.mkdir(parents=True, exist_ok=True)
    vf = where / "values.yaml"
    vf.write_text(yaml.safe_dump(values))
    out = helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        HELM_KUBE_VERSION,
        "--values",
        str(vf),
        binary=binary,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _strip_labels(labels: dict[str, str] | None) -> None:
    for k in HELM_ONLY_LABELS:
        (labels or {}).pop(k, None)


def normalized(objs: list[Obj]) -> list[Obj]:
    """Objects without Helm's own labels, name-keyed lists sorted, objects sorted: two
    renderings that apply the same objects compare equal."""
    out = []
    for o in yaml.safe_load(yaml.safe_dump(objs)):  # deep copy
        _strip_labels(o["metadata"].get("labels"))
        spec = o.get("spec", {})
        if isinstance(spec.get("podSelector"), dict):  # NetworkPolicy
            _strip_labels(spec["podSelector"].get("matchLabels"))
        if isinstance(spec.get("selector"), dict):
            _strip_labels(spec["selector"].get("matchLabels"))
            if o["kind"] == "Service":
                _strip_labels(spec["selector"])
        if "template" in spec:
            _strip_labels(spec["template"]["metadata"].get("labels"))
            pod = spec["template"]["spec"]
            pod["volumes"] = sorted(pod.get("volumes", []), key=lambda v: v["name"])
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                c["env"] = sorted(c.get("env", []), key=lambda e: e["name"])
                c["volumeMounts"] = sorted(c.get("volumeMounts", []), key=lambda m: m["mountPath"])
        out.append(o)
    return sorted(out, key=lambda o: (o["kind"], o["metadata"]["name"]))
