"""The template conformance table against Go itself: every row of
tests/data/template/conformance.yaml runs through Go's own text/template, set up as NFD
v0.19.0's pkg/apis/nfd/template sets it up (`nfd-oracle template`: NFD's NewHelper decides
whether it parses, NFD's Helper.ExpandMap reads `expand_map` rows), and Go must give what
the row says: the row's answer, or for a row marked `differs`, the Go answer written
there. tests/rules/test_template_conformance.py holds nfd-gpu to the same rows. NFD's
Helper must also accept exactly the function names of tests/data/template/functions.yaml.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.oracle import SUMMARY, run_oracle
from tests.rules.template_table import (
    functions,
    go_expected,
    nfd_gpu_answer,
    row_data,
    rows,
    template_text,
)

ROWS = rows()


@pytest.fixture(scope="module")
def go_answers() -> list[dict[str, Any]]:
    lines = "".join(
        json.dumps(
            {
                "id": i,
                "template": template_text(r),
                "data": row_data(r),
                "map": bool(r.get("expand_map")),
            }
        )
        + "\n"
        for i, r in enumerate(ROWS)
    )
    res = run_oracle("template", stdin=lines)
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in res.stdout.splitlines()]
    assert [a.get("id") for a in answers] == list(range(len(ROWS))), res.stderr
    return answers


def go_said(row: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """Go's answer in the table's terms (a long output as its size, as the row gives it)."""
    if "stage" in answer:
        return {"error": answer["stage"]}
    if row.get("expand_map"):
        return {"map": answer.get("map", {})}
    if "output_bytes" in go_expected(row):
        return {"output_bytes": len(answer["output"].encode())}
    return {"output": answer["output"]}


def test_go_agrees_with_every_row(go_answers: list[dict[str, Any]]) -> None:
    wrong = [
        f"{r['name']}: table {go_expected(r)}, Go {go_said(r, a)} ({a.get('error', '')})"
        for r, a in zip(ROWS, go_answers, strict=True)
        if go_said(r, a) != go_expected(r)
    ]
    assert not wrong, "\n".join(wrong)
    differs = sum("differs" in r for r in ROWS)
    SUMMARY.append(
        f"template conformance: Go's text/template agrees with all {len(ROWS)} rows "
        f"({differs} marked where nfd-gpu differs, with the reason)"
    )


def test_nfd_gpu_differs_only_where_marked(go_answers: list[dict[str, Any]]) -> None:
    """The other side of the table: with Go's live answer, nfd-gpu agrees on every row
    not marked `differs` (kind of error, output or map) and differs on every marked one."""
    unmarked, marked_but_same = [], []
    for r, a in zip(ROWS, go_answers, strict=True):
        ours = {k: v for k, v in nfd_gpu_answer(r).items() if k != "message"}
        same = ours == go_said(r, a)
        if "differs" in r and same:
            marked_but_same.append(r["name"])
        if "differs" not in r and not same:
            unmarked.append(f"{r['name']}: nfd-gpu {ours}, Go {go_said(r, a)}")
    assert not unmarked, "\n".join(unmarked)
    assert not marked_but_same, marked_but_same


def test_nfd_accepts_exactly_the_listed_functions() -> None:
    res = run_oracle("template-funcs")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == sorted(functions()["allowed"])
