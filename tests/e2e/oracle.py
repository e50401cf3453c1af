"""Run NFD's own code (tests/e2e/bin/nfd-oracle, built by tests/e2e/build.sh) and
nfd-gpu's on the same input, for the differential tests.

Without the binary the oracle tests skip with the reason, except in CI (``CI``
set), where a missing oracle is a failure: CI builds it first (``.ci/run``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.rules.engine import evaluate
from nfd_gpu.rules.features_doc import FeatureFileError, features_from_document
from nfd_gpu.rules.loader import ruleset_from_documents
from nfd_gpu.rules.model import RuleError

E2E = Path(__file__).resolve().parent
ORACLE = E2E / "bin" / "nfd-oracle"
# Lines printed at the end of the pytest run (tests/conftest.py), e.g. case counts.
SUMMARY: list[str] = []


def oracle() -> Path:
    """The oracle binary; skip (locally) or fail (CI) when it was not built."""
    if ORACLE.is_file() and os.access(ORACLE, os.X_OK):
        return ORACLE
    msg = f"{ORACLE} not built: run `bash tests/e2e/build.sh` (needs Go >= 1.26)"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def run_oracle(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(oracle()), *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def oracle_batch(cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Evaluate ``{"rules": [docs], "features": doc}`` cases with NFD's engine."""
    lines = "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in cases)
    res = run_oracle("batch", stdin=lines)
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(answers) == len(cases), res.stderr
    return answers


class OracleProcess:
    """One long-running ``nfd-oracle batch``, asked one case at a time (a line
    in, a line out), so each Hypothesis example costs a pipe round trip."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(oracle()), "batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def ask(self, case: Mapping[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(case, separators=(",", ":")) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"nfd-oracle batch exited ({self.proc.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def nfd_gpu_case(rule_docs: Sequence[Any], features_doc: Any) -> dict[str, Any]:
    """The same case with nfd-gpu's engine: ``{"result": ...}`` or ``{"error": ...}``.

    Rules load non-strict, so expression and template errors surface at
    evaluation time per rule, as in nfd-master (where the API server has
    already accepted the object)."""
    try:
        rs = ruleset_from_documents(rule_docs, strict=False)
    except RuleError as e:
        return {"error": "; ".join(e.problems)}
    try:
        feats = features_from_document(features_doc, "input")
    except FeatureFileError as e:
        return {"error": str(e)}
    return {"result": evaluate(rs, feats).to_json()}


def error_key(e: Mapping[str, str]) -> tuple[str, str]:
    """What must agree about one error: the rule, and what was rejected (an output
    item, named) or that the rule failed. Message wording is each engine's own."""
    msg = e["message"]
    if msg.startswith("ignoring "):
        return e["rule"], msg.partition(": ")[0]
    return e["rule"], "rule failed"


def comparable(answer: Mapping[str, Any]) -> Any:
    if "error" in answer:
        return {"input error": True}
    r = dict(answer["result"])
    r["errors"] = sorted(error_key(e) for e in r["errors"])
    return r
