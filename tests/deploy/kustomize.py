"""A small kustomize renderer for the tests, so CI needs no ``kubectl``.

No kustomize build is installable from PyPI or Debian apt (``kubectl`` is not
packaged there), so ``tests/deploy`` renders ``deploy/`` with this module where the real
one (built from its Go module) is absent. It supports
exactly the subset of ``kustomization.yaml`` that ``deploy/`` uses, and rejects anything
else, so a manifest that needs more fails loudly instead of rendering wrong:

* ``resources``: files (multi-document YAML) and directories with a kustomization;
* ``components``: directories with a ``kind: Component`` kustomization, applied in order
  to the objects accumulated so far (their resources added, then their transformers run
  over everything), before the parent's own transformers, as kustomize does;
* ``namespace``: set on every namespaced object, and on ``ServiceAccount`` subjects of
  (Cluster)RoleBindings that name a ServiceAccount of the build (as kustomize does);
* ``patches`` with ``path``: strategic-merge patches matched by kind and name, with the
  list merge keys of the kinds used (containers, volumes, env, volumeMounts, ports) and
  ``$patch: delete`` to drop a whole object;
* ``images``: ``name`` -> ``newName``/``newTag``.

``test_kustomize_components.py`` renders the same kustomizations with the real
``kustomize`` (built by ``tests/e2e/build-tools.sh``) and checks that both agree.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

ALLOWED_KEYS = {"apiVersion", "kind", "resources", "components", "namespace", "patches", "images"}

CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "NodeFeatureRule",
    "RuntimeClass",
    "PriorityClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}

# Strategic-merge keys (from the Kubernetes API's patchMergeKey) for the lists in deploy/.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
}


class KustomizeError(ValueError):
    """The kustomization uses something this renderer does not support, or is broken."""


def load_docs(path: Path) -> list[Obj]:
    with path.open(encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _key(obj: Obj) -> tuple[str, str]:
    return (str(obj.get("kind")), str(obj.get("metadata", {}).get("name")))


def merge(base: Any, patch: Any, field: str | None = None) -> Any:
    """Strategic merge of ``patch`` into ``base`` (both left unmodified)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        mk = MERGE_KEYS[field]
        # Like kustomize: the patch's items first (merged into the base item with the
        # same key, if any), in patch order, then the base items the patch leaves alone.
        by_key = {b.get(mk): b for b in base if isinstance(b, dict)}
        head: list[Any] = []
        for item in patch:
            if not isinstance(item, dict) or mk not in item:
                raise KustomizeError(f"{field}: list item without merge key {mk!r}: {item!r}")
            cur = by_key.get(item[mk])
            head.append(merge(cur, item) if cur is not None else copy.deepcopy(item))
        done = {item[mk] for item in patch}
        return head + [copy.deepcopy(b) for b in base if b.get(mk) not in done]
    return copy.deepcopy(patch)  # scalars and lists without merge key: replace


def _set_image(obj: Obj, images: list[Obj]) -> None:
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        name, _, _tag = str(c.get("image", "")).partition(":")
        for img in images:
            if img.get("name") == name:
                new = img.get("newName", name)
                tag = img.get("newTag")
                c["image"] = f"{new}:{tag}" if tag else new


KINDS = {
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "Component": "kustomize.config.k8s.io/v1alpha1",
}


def _load_kustomization(d: Path, kind: str) -> tuple[Path, Obj]:
    kfile = d / "kustomization.yaml"
    if not kfile.is_file():
        raise KustomizeError(f"{d}: no kustomization.yaml")
    (k,) = load_docs(kfile)
    unknown = set(k) - ALLOWED_KEYS
    if unknown:
        raise KustomizeError(f"{kfile}: unsupported fields {sorted(unknown)}")
    if k.get("kind", "Kustomization") != kind or k.get("apiVersion", KINDS[kind]) != KINDS[kind]:
        raise KustomizeError(f"{kfile}: expected {KINDS[kind]} {kind}, got {k.get('kind')}")
    return kfile, k


def build(directory: Path | str) -> list[Obj]:
    """Render the kustomization in ``directory``; objects in resource order."""
    d = Path(directory)
    kfile, k = _load_kustomization(d, "Kustomization")
    return _apply(d, kfile, k, [])


def _apply(d: Path, kfile: Path, k: Obj, objs: list[Obj]) -> list[Obj]:
    """Kustomize's order for one kustomization (a Kustomization starts from nothing, a
    Component from the objects its parent has accumulated so far): add its ``resources``
    (each a file or a Kustomization directory built on its own), then apply each of its
    ``components`` in order to everything accumulated, then its own transformers
    (``patches``, ``namespace``, ``images``) to everything accumulated."""
    objs = list(objs)
    for res in k.get("resources", []) + k.get("components", []):
        if Path(res).is_absolute():  # kustomize: "new root ... cannot be absolute"
            raise KustomizeError(f"{kfile}: {res!r}: absolute paths are not allowed")
    for res in k.get("resources", []):
        p = d / res
        if p.is_dir():
            objs.extend(build(p))
        elif p.is_file():
            objs.extend(load_docs(p))
        else:
            raise KustomizeError(f"{kfile}: resource {res!r} not found (remote URLs unsupported)")
        keys = [_key(o) for o in objs]
        if len(set(keys)) != len(keys):
            raise KustomizeError(f"{d}: duplicate objects {keys}")
    for comp in k.get("components", []):
        cdir = d / comp
        cfile, ck = _load_kustomization(cdir, "Component")
        objs = _apply(cdir, cfile, ck, objs)

    for entry in k.get("patches", []):
        if set(entry) != {"path"}:
            raise KustomizeError(f"{kfile}: only 'patches: - path:' is supported, got {entry}")
        for patch in load_docs(d / entry["path"]):
            if not isinstance(patch, dict) or "kind" not in patch:
                raise KustomizeError(f"{entry['path']}: not a strategic-merge patch")
            matches = [i for i, o in enumerate(objs) if _key(o) == _key(patch)]
            if len(matches) != 1:
                raise KustomizeError(f"{entry['path']}: no single target for {_key(patch)}")
            (i,) = matches
            if patch.get("$patch") == "delete":
                del objs[i]
            elif "$patch" in patch:
                raise KustomizeError(f"{entry['path']}: unsupported $patch {patch['$patch']}")
            else:
                objs[i] = merge(objs[i], patch)

    ns = k.get("namespace")
    if ns:
        sas = {o["metadata"]["name"] for o in objs if o.get("kind") == "ServiceAccount"}
        for o in objs:
            if o.get("kind") not in CLUSTER_SCOPED:
                o.setdefault("metadata", {})["namespace"] = ns
            if o.get("kind") in ("RoleBinding", "ClusterRoleBinding"):
                for s in o.get("subjects", []):
                    if s.get("kind") == "ServiceAccount" and s.get("name") in sas:
                        s["namespace"] = ns
    if k.get("images"):
        for o in objs:
            _set_image(o, k["images"])
    return objs
