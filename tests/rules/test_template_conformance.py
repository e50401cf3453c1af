"""nfd-gpu's Go template interpreter against the conformance table
(tests/data/template/conformance.yaml: Go's answers, checked against Go's own
text/template by tests/e2e/test_oracle_template.py) and against the list of functions
NFD v0.19.0 allows in templates (tests/data/template/functions.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from nfd_gpu.rules.template import TemplateError, parse
from nfd_gpu.rules.template.funcs import FUNCTIONS
from tests.rules.template_table import expected, functions, nfd_gpu_answer, rows

ROWS = rows()


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_row(row: dict[str, Any]) -> None:
    assert nfd_gpu_answer(row) == expected(row)


def test_table_is_well_formed() -> None:
    names = [r["name"] for r in ROWS]
    assert len(names) == len(set(names)), "row names must be unique"
    for r in ROWS:
        assert ("template" in r) != ("template_parts" in r), r["name"]
        assert sum(k in r for k in ("output", "map", "error")) == 1, r["name"]
        assert r.get("error") in (None, "parse", "exec", "expand"), r["name"]
        assert ("message" in r) == ("error" in r), r["name"]
        if "differs" in r:
            assert r["differs"]["reason"].strip() and r["differs"]["go"], r["name"]
            # a row that says it differs must say how: Go's answer is not nfd-gpu's
            ours = {k: v for k, v in expected(r).items() if k != "message"}
            assert r["differs"]["go"] != ours, r["name"]


def test_implemented_and_refused_functions_are_exactly_nfds() -> None:
    table = functions()
    allowed = set(table["allowed"])
    refused = [n for group in table["not_implemented"] for n in group["names"]]
    assert len(refused) == len(set(refused))
    assert set(FUNCTIONS) <= allowed, set(FUNCTIONS) - allowed
    assert not set(FUNCTIONS) & set(refused)
    assert set(FUNCTIONS) | set(refused) == allowed
    assert not set(table["removed_by_nfd"]) & allowed


@pytest.mark.parametrize(
    "name",
    [n for g in functions()["not_implemented"] for n in g["names"]] + functions()["removed_by_nfd"],
)
def test_functions_not_implemented_are_refused_at_parse(name: str) -> None:
    with pytest.raises(TemplateError, match=rf"function '{name}' (not defined|is not supported)"):
        parse(f"{{{{ if false }}}}{{{{ {name} }}}}{{{{ end }}}}")
