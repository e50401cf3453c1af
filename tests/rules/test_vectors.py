"""NFD's own test vectors (tests/data/nfd/expression-vectors-public.json).

Every vector runs twice: through the compiled matcher the engine calls for what
NFD's Go test calls, and end to end through the loader and `evaluate` (the code
`nfd-gpu rules test` runs) with a rule built from the vector.
"""

from __future__ import annotations

from typing import Any

import pytest

from nfd_gpu.rules import RuleError, ruleset_from_documents
from nfd_gpu.rules.expressions import (
    ExpressionError,
    MatchExpression,
    compile_expression,
    compile_expressions,
    match_multi,
    match_names_multi,
    validate_expression,
)
from tests.rules.conftest import run_rules
from tests.rules.nfd_vectors import load_vectors, vector_rule

KNOWN_KINDS = {"evaluate", "flag", "set_flags", "name_flags", "custom_validate"}
VECTORS = load_vectors()


def _expr(d: dict[str, Any]) -> MatchExpression:
    return MatchExpression(d["op"], tuple(d.get("value") or ()), d.get("type") or "")


def _call(fn: Any, *args: Any) -> tuple[Any, bool]:
    try:
        return fn(*args), False
    except ExpressionError:
        return None, True


def test_vector_file_present_and_kinds_known() -> None:
    assert {v["kind"] for v in VECTORS} <= KNOWN_KINDS
    assert len(VECTORS) == 127
    assert len(RULE_VECTORS) == 125  # the two MatchAny validation vectors left out


def _direct(v: dict[str, Any]) -> None:
    kind, exp = v["kind"], v["expected"]
    if kind == "custom_validate":
        _, err = _call(validate_expression, _expr(v), True)
        assert err == exp["error"]
        return
    if kind == "evaluate":  # evaluateMatchExpression; the value as Go's %v renders it
        res, err = _call(compile_expression(_expr(v)), v["valid"], v["input_as_string"])
        assert err == exp["error"]
        if not err:
            assert res == exp["match"]
        return
    keys = None if v["input"] is None else set(v["input"])
    if kind == "flag":  # evaluateMatchExpressionKeys
        res, err = _call(compile_expression(_expr(v)), keys is not None and v["key"] in keys, None)
        assert err == exp["error"]
        if not err:
            assert res == exp["match"]
        return
    # MatchGetKeys / MatchKeyNames on a flag feature: Go reads a nil map as an empty one
    flags = keys or set()
    if kind == "set_flags":
        exprs = compile_expressions(tuple((k, _expr(e)) for k, e in v["expressions"].items()))
        res, err = _call(match_multi, exprs, flags, None, None)
    else:
        res, err = _call(match_names_multi, _expr(v["expression"]), flags, None, None)
    assert err == exp["error"]
    if not err:
        assert res[0] == exp["match"]
        assert (res[1] or []) == (exp["matched"] or [])


def _end_to_end(v: dict[str, Any]) -> None:
    kind, exp = v["kind"], v["expected"]
    rule, features = vector_rule(v)
    if kind == "custom_validate":
        try:
            ruleset_from_documents([{"rules": [rule]}], strict=True)
            err = False
        except RuleError as e:
            err = True
            assert len(e.problems) == 1 and "matchExpressions.k" in e.problems[0]
        assert err == exp["error"]
        return
    out = run_rules([rule], features)
    assert bool(out.errors) == exp["error"], out.errors
    if exp["error"]:
        assert out.vars == {}
        return
    assert (out.vars.get("matched") == "yes") == exp["match"]
    if "matched" in exp and exp["match"]:
        want = "".join(e["Name"] + "," for e in exp["matched"] or [])
        assert out.vars["names"] == want


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"].split(":", 1)[1] for v in VECTORS])
def test_vector_direct(vector: dict[str, Any]) -> None:
    _direct(vector)


# End to end, every vector a rule can hold: not the validation vectors of the empty
# operator (Go's MatchAny), which is not in the NodeFeatureRule CRD's enum, so no rule file
# can carry it (test_vector_direct checks them)
RULE_VECTORS = [v for v in VECTORS if not (v["kind"] == "custom_validate" and v["op"] == "")]


@pytest.mark.parametrize(
    "vector", RULE_VECTORS, ids=[v["id"].split(":", 1)[1] for v in RULE_VECTORS]
)
def test_vector_end_to_end(vector: dict[str, Any]) -> None:
    _end_to_end(vector)
