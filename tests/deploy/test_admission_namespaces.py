"""The admission policy's label namespaces are the profiles' (issue 34, finding 6).

Every ValidatingAdmissionPolicy shipped (each kustomize overlay that renders one, the
Helm chart with its defaults) lists exactly ``nfd_gpu.labels.registry.label_namespaces()``
in ``variables.labelNamespaces`` and checks every ``spec.labels`` key against it; and each
profile's labels on every fixture, with every profile option, are under its declared
namespaces, so the list cannot fall behind what the agent writes. The real
kube-apiserver's verdicts are tests/e2e/test_admission_policy.py's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nfd_gpu.labels.options import PROFILE_OPTIONS
from nfd_gpu.labels.registry import PROFILES, label_namespaces
from nfd_gpu.scan import run_scan
from tests.conftest import FIXTURES, REPO
from tests.deploy import renderings as r
from tests.deploy.kustomize import build

Obj = dict[str, object]
OVERLAYS = sorted(p.name for p in (REPO / "deploy" / "overlays").iterdir() if p.is_dir())


def _namespaces(policy: Obj) -> list[str]:
    spec = policy["spec"]
    assert isinstance(spec, dict)
    (var,) = [v for v in spec["variables"] if v["name"] == "labelNamespaces"]
    got = ast.literal_eval(var["expression"].strip())
    assert isinstance(got, list)
    exprs = " ".join(v["expression"] for v in spec["validations"])
    assert "object.spec.labels.all(k, variables.labelNamespaces.exists(" in exprs
    return got


def _policies(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_policy_lists_the_profiles_namespaces(overlay: str) -> None:
    objs = build(REPO / "deploy" / "overlays" / overlay)
    api_access = any(o["kind"] == "Role" and "nodefeatures" in str(o.get("rules")) for o in objs)
    policies = _policies(objs)
    # an overlay whose agent may write NodeFeatures carries the policy; so does every other
    # (all overlays carry the same objects, so a switch leaves none behind:
    # tests/e2e/test_overlay_switch.py)
    assert policies, overlay
    assert api_access or overlay == "nfd-worker-sidecar", overlay
    for p in policies:
        assert _namespaces(p) == list(label_namespaces())


def test_helm_policy_lists_the_profiles_namespaces(tmp_path: Path) -> None:
    (policy,) = _policies(r.helm_template({}, tmp_path))
    assert _namespaces(policy) == list(label_namespaces())


def test_profiles_write_only_their_namespaces() -> None:
    options = tuple(PROFILE_OPTIONS)
    for root in sorted(FIXTURES.iterdir()):
        for name, profile in PROFILES.items():
            opts = tuple(o for o in options if PROFILE_OPTIONS[o][0] == name)
            labels = run_scan(root, profiles=(name,), profile_options=opts).labels
            outside = [
                k for k in labels if not any(k.startswith(ns + "/") for ns in profile.namespaces)
            ]
            assert not outside, (root.name, name, outside[:5])
