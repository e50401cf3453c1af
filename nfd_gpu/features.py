"""NFD's feature model, in the exact JSON shape of ``NodeFeature.spec.features``.

::

    {
      "flags":      {"<domain>.<feature>": {"elements": {"<name>": {}}}},
      "attributes": {"<domain>.<feature>": {"elements": {"<name>": "<string>"}}},
      "instances":  {"<domain>.<feature>": {"elements": [{"attributes": {"<k>": "<string>"}}]}},
    }

- Feature names are lower case. NFD lower-cases the feature name of every rule term,
  so an upper-case name could never match.
- All values are strings.
- This module is the contract between discovery, the rule engine and the sinks.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

Features = dict[str, dict[str, Any]]


def empty() -> Features:
    """A feature set with no features."""
    return {"flags": {}, "attributes": {}, "instances": {}}


def add_flags(features: Features, name: str, elements: Iterable[str]) -> None:
    """Add flag elements to feature ``name``, as a union."""
    elems = features["flags"].setdefault(name, {"elements": {}})["elements"]
    for e in elements:
        elems[e] = {}


def add_attributes(features: Features, name: str, elements: Mapping[str, str]) -> None:
    """Add attribute elements to feature ``name``; later values win."""
    features["attributes"].setdefault(name, {"elements": {}})["elements"].update(
        {k: str(v) for k, v in elements.items()}
    )


def add_instances(features: Features, name: str, instances: Iterable[Mapping[str, str]]) -> None:
    """Append instances to feature ``name``."""
    elems = features["instances"].setdefault(name, {"elements": []})["elements"]
    for inst in instances:
        elems.append({"attributes": {k: str(v) for k, v in inst.items()}})


def merge(into: Features, other: Features) -> None:
    """Merge ``other`` into ``into`` the way nfd-master merges NodeFeature objects.

    Flags are unioned, attributes overwritten per key, instances appended.
    """
    for name, fs in other.get("flags", {}).items():
        add_flags(into, name, fs.get("elements", {}))
    for name, fs in other.get("attributes", {}).items():
        add_attributes(into, name, fs.get("elements", {}))
    for name, fs in other.get("instances", {}).items():
        add_instances(into, name, (i.get("attributes", {}) for i in fs.get("elements", [])))


# Feature names nfd-gpu owns. Only these are published (NodeFeature, feature file): nfd-master
# appends the instances of every NodeFeature of a node, so republishing NFD's own features
# (pci.device, kernel.loadedmodule) would count each element twice in rules such as
# ``len .pci.device``. Rules nfd-gpu evaluates itself (--rules) still see every feature.
OWNED_PREFIX = "gpu."


def owned(features: Features) -> Features:
    """Return the features whose names nfd-gpu owns, ``gpu.*``, as a new feature set."""
    return {
        kind: {
            name: copied_set(kind, fs)
            for name, fs in features.get(kind, {}).items()
            if name.startswith(OWNED_PREFIX)
        }
        for kind in ("flags", "attributes", "instances")
    }


def copied_set(kind: str, fs: Any) -> Any:
    """``copy.deepcopy(fs)`` of one feature set of ``kind``.

    - A set of the module docstring's shape is copied as that shape: string values are
      shared (immutable), the dicts and lists are new. It is a tenth of deepcopy's time.
    - Anything else is deepcopy's.
    """
    elems = fs.get("elements") if type(fs) is dict and len(fs) == 1 else None
    if kind == "instances" and type(elems) is list:
        out = []
        for inst in elems:
            attrs = inst.get("attributes") if type(inst) is dict and len(inst) == 1 else None
            if type(attrs) is not dict or not all(type(v) is str for v in attrs.values()):
                return copy.deepcopy(fs)
            out.append({"attributes": dict(attrs)})
        return {"elements": out}
    if type(elems) is not dict:
        return copy.deepcopy(fs)
    if kind == "attributes" and all(type(v) is str for v in elems.values()):
        return {"elements": dict(elems)}
    if kind == "flags" and all(type(v) is dict and not v for v in elems.values()):
        return {"elements": {k: {} for k in elems}}
    return copy.deepcopy(fs)
