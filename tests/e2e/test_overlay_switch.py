"""Switching kustomize overlays on a real kube-apiserver leaves nothing behind: every
overlay carries the same objects (kind, namespace, name), so ``kubectl apply -k`` of the
new one replaces each, and ``kubectl delete -k`` of whichever is installed removes all.

For every ordered pair of overlays the test applies the first, then the second, with the
real ``kubectl`` (tests/e2e/build.sh), and lists what is on the server of the union of all
overlays' objects but not in the second; then ``delete -k`` of the last one, and the same
list must be empty (the Namespace may stay Terminating: no namespace controller runs)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.e2e.cluster import BIN, ApiError, Cluster, Obj, object_path
from tests.e2e.test_install_doc import empty_cluster  # noqa: F401  (fixture)

OVERLAYS = sorted(p.name for p in (REPO / "deploy" / "overlays").iterdir() if p.is_dir())
Key = tuple[str, str, str]  # kind, namespace, name


def kubectl(cluster: Cluster, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    p = subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", str(cluster.admin_kubeconfig), *args],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO, check=False,
    )  # fmt: skip
    assert p.returncode == 0, f"kubectl {' '.join(args)}: rc {p.returncode}\n{p.stderr}"
    return p.stdout


def rendered(cluster: Cluster, overlay: str) -> dict[Key, Obj]:
    """The overlay's objects, as the real ``kubectl kustomize`` builds them."""
    text = kubectl(cluster, "kustomize", f"deploy/overlays/{overlay}")
    out: dict[Key, Obj] = {}
    for obj in yaml.safe_load_all(text):
        meta = obj["metadata"]
        out[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    assert {"DaemonSet", "Namespace"} <= {k[0] for k in out}, overlay
    return out


def on_server(cluster: Cluster, objs: dict[Key, Obj]) -> set[Key]:
    """Which of ``objs`` exist (a Namespace being deleted counts as gone)."""
    present = set()
    for key, obj in objs.items():
        try:
            got = cluster.request("GET", object_path(obj))
        except ApiError as e:
            assert e.status == 404, e
            continue
        if key[0] == "Namespace" and got.get("status", {}).get("phase") == "Terminating":
            continue
        present.add(key)
    return present


def test_every_overlay_switch_leaves_nothing_behind(
    empty_cluster: Cluster,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    c = empty_cluster
    assert len(OVERLAYS) >= 2
    renders = {o: rendered(c, o) for o in OVERLAYS}
    union = {k: v for r in renders.values() for k, v in r.items()}
    left: dict[str, list[Key]] = {}
    for old, new in itertools.permutations(OVERLAYS, 2):
        kubectl(c, "apply", "-k", f"deploy/overlays/{old}")
        kubectl(c, "apply", "-k", f"deploy/overlays/{new}")
        extra = sorted(on_server(c, union) - set(renders[new]))
        (role,) = [o for k, o in renders[new].items() if k[0] == "Role"]
        granted = c.request("GET", object_path(role)).get("rules") or []
        if granted != (role.get("rules") or []):  # the old overlay's grants stayed
            extra.append(("Role rules", str(granted), ""))
        if extra:
            left[f"{old} -> {new}"] = extra
    kubectl(c, "delete", "-k", f"deploy/overlays/{new}", "--wait=false")
    remaining = sorted(on_server(c, union))
    if remaining:
        left[f"delete -k {new}"] = remaining
    assert left == {}, json.dumps(left, indent=1)
