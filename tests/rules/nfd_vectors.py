"""NFD's own match-expression test vectors (tests/data/nfd/expression-vectors-public.json,
see tests/data/README.md) and the rule each one becomes, for the two suites that run
them: tests/rules/test_vectors.py (nfd-gpu alone) and tests/e2e/test_oracle_vectors.py
(nfd-gpu against NFD's code)."""

from __future__ import annotations

import json
from typing import Any

from nfd_gpu.features import Features
from tests.conftest import DATA
from tests.rules.conftest import feats

VECTORS_FILE = DATA / "nfd" / "expression-vectors-public.json"
# The names of the matched elements, in NFD's order: what ``matched`` in a vector lists.
NAMES_TEMPLATE = "names={{ range .test.feat }}{{ .Name }},{{ end }}"


def load_vectors() -> list[dict[str, Any]]:
    data = json.loads(VECTORS_FILE.read_text())
    vectors: list[dict[str, Any]] = data["vectors"]
    assert len(vectors) == data["count"], VECTORS_FILE
    return vectors


def vector_rule(v: dict[str, Any]) -> tuple[dict[str, Any], Features]:
    """One vector as a rule (``matched: yes`` and the matched names when it matches) and
    the features it runs on."""
    kind = v["kind"]
    if kind == "custom_validate":
        features = feats(attributes={"test.feat": {"other": "x"}})
        expr = {"op": v["op"], "value": v["value"]}
        term: dict[str, Any] = {"feature": "test.feat", "matchExpressions": {"k": expr}}
    elif kind == "evaluate":
        expr = {"op": v["op"], "value": v["value"]}
        if not v["valid"]:
            features = feats(attributes={"test.feat": {"other": "x"}})
        elif v["input"] is None:
            features = feats(flags={"test.feat": ["key"]})
        else:
            features = feats(attributes={"test.feat": {"key": v["input_as_string"]}})
        term = {"feature": "test.feat", "matchExpressions": {"key": expr}}
    elif kind == "flag":
        features = feats(flags={"test.feat": v["input"] or []})
        expr = {"op": v["op"], "value": v["value"]}
        term = {"feature": "test.feat", "matchExpressions": {v["key"]: expr}}
    elif kind == "set_flags":
        features = feats(flags={"test.feat": v["input"] or []})
        term = {"feature": "test.feat", "matchExpressions": v["expressions"]}
    else:  # name_flags
        features = feats(flags={"test.feat": v["input"] or []})
        term = {"feature": "test.feat", "matchName": v["expression"]}
    rule = {
        "name": "vector",
        "vars": {"matched": "yes"},
        "varsTemplate": NAMES_TEMPLATE,
        "matchFeatures": [term],
    }
    return rule, features
