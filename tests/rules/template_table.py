"""The template conformance table (tests/data/template/conformance.yaml) and the
functions NFD allows in templates (functions.yaml): loading, and nfd-gpu's answer to a
row in the table's own terms. Used by tests/rules/test_template_conformance.py and, with
Go's answer beside it, tests/e2e/test_oracle_template.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from nfd_gpu.rules.template import TemplateError, expand_map, parse

TABLE_DIR = Path(__file__).resolve().parents[1] / "data" / "template"
# What ExpandMap's own error says (everything else an execution raises is "exec").
_EXPAND_ERROR = "invalid expanded template line"


@cache
def table() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((TABLE_DIR / "conformance.yaml").read_text())
    return loaded


@cache
def functions() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((TABLE_DIR / "functions.yaml").read_text())
    return loaded


def rows() -> list[dict[str, Any]]:
    return list(table()["rows"])


def template_text(row: dict[str, Any]) -> str:
    if "template_parts" in row:
        return "".join(text * times for text, times in row["template_parts"])
    text: str = row["template"]
    return text


def row_data(row: dict[str, Any]) -> Any:
    if "dataset" in row:
        return table()["datasets"][row["dataset"]]
    return row.get("data", {})


def expected(row: dict[str, Any]) -> dict[str, Any]:
    """nfd-gpu's answer as the row states it: output, map, or error (+ message)."""
    keys = ("output", "map", "error", "message")
    return {k: row[k] for k in keys if k in row}


def go_expected(row: dict[str, Any]) -> dict[str, Any]:
    """Go's answer as the row states it (without nfd-gpu's message)."""
    if "differs" in row:
        go: dict[str, Any] = row["differs"]["go"]
        return go
    return {k: v for k, v in expected(row).items() if k != "message"}


def nfd_gpu_answer(row: dict[str, Any]) -> dict[str, Any]:
    try:
        tmpl = parse(template_text(row))
    except TemplateError as e:
        return {"error": "parse", "message": str(e)}
    try:
        if row.get("expand_map"):
            return {"map": expand_map(tmpl, row_data(row))}
        return {"output": tmpl.execute(row_data(row))}
    except TemplateError as e:
        kind = "expand" if str(e).startswith(_EXPAND_ERROR) else "exec"
        return {"error": kind, "message": str(e)}
