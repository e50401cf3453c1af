"""Node features from a NodeFeature document, YAML or JSON.

It is the input of ``nfd-gpu rules test --features`` and of the differential tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nfd_gpu.features import Features
from nfd_gpu.host import boundedfile
from nfd_gpu.yamllib import yaml

# A NodeFeature document is an API object (etcd stores at most 1.5 MiB): the cap of a rule
# file (rules/loader.py's MAX_RULE_FILE).
MAX_FEATURES_FILE = 4 * 1024 * 1024


class FeatureFileError(ValueError):
    """A features file that cannot be read or is not in NodeFeature shape."""


def features_from_document(doc: Any, source: str) -> Features:
    """Accept a NodeFeature object, its ``spec``, or its ``spec.features``."""
    if not isinstance(doc, Mapping):
        raise FeatureFileError(f"{source}: not a NodeFeature object or features map")
    if doc.get("kind") == "NodeFeature" or "spec" in doc:
        spec = doc.get("spec")
        if not isinstance(spec, Mapping):
            raise FeatureFileError(f"{source}: spec: missing or not a map")
        doc = spec.get("features") or {}
    elif "features" in doc and not {"flags", "attributes", "instances"} & set(doc):
        doc = doc["features"] or {}
    if not isinstance(doc, Mapping):
        raise FeatureFileError(f"{source}: features: not a map")
    unknown = set(doc) - {"flags", "attributes", "instances"}
    if unknown:
        raise FeatureFileError(f"{source}: features.{sorted(unknown)[0]}: unknown field")
    out: Features = {"flags": {}, "attributes": {}, "instances": {}}
    for kind in ("flags", "attributes", "instances"):
        sets = doc.get(kind) or {}
        if not isinstance(sets, Mapping):
            raise FeatureFileError(f"{source}: features.{kind}: not a map")
        for name, fs in sets.items():
            where = f"{source}: features.{kind}.{name}"
            elems = fs.get("elements") if isinstance(fs, Mapping) else None
            if kind == "instances":
                if not isinstance(elems, list):
                    raise FeatureFileError(f"{where}.elements: must be a list")
                insts = []
                for i, inst in enumerate(elems):
                    attrs = inst.get("attributes") if isinstance(inst, Mapping) else None
                    if not isinstance(attrs, Mapping):
                        raise FeatureFileError(f"{where}.elements[{i}].attributes: must be a map")
                    insts.append({"attributes": {str(k): _s(v) for k, v in attrs.items()}})
                out[kind][str(name)] = {"elements": insts}
            else:
                if elems is None:
                    elems = {}
                if not isinstance(elems, Mapping):
                    raise FeatureFileError(f"{where}.elements: must be a map")
                conv = {str(k): ({} if kind == "flags" else _s(v)) for k, v in elems.items()}
                out[kind][str(name)] = {"elements": conv}
    return out


def _s(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def read_features_file(path: Path) -> Features:
    try:
        text = boundedfile.read_text(path, MAX_FEATURES_FILE)
    except boundedfile.FileReadError as e:
        raise FeatureFileError(str(e)) from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise FeatureFileError(f"{path}: cannot parse YAML/JSON{where}") from None
    if len(docs) != 1:
        raise FeatureFileError(f"{path}: expected one NodeFeature document, found {len(docs)}")
    return features_from_document(docs[0], str(path))
