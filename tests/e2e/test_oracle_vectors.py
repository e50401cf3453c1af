"""NFD's own test vectors and feature-file test data, three ways: the expected
answer recorded from NFD's Go tests, NFD's code (nfd-oracle), and nfd-gpu.

Data (copied so that a clone alone runs): tests/data/nfd/expression-vectors-public.json
(see tests/data/README.md) and tests/sinks/data/nfd-local-testdata/ (NFD's
source/local/testdata).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.oracle import SUMMARY, comparable, nfd_gpu_case, oracle_batch, run_oracle
from tests.rules.nfd_vectors import load_vectors, vector_rule
from tests.sinks.nfd_local_parser import parse_feature_file

TESTS = Path(__file__).resolve().parents[1]
VECTORS = load_vectors()
LOCAL_TESTDATA = TESTS / "sinks" / "data" / "nfd-local-testdata" / "features.d"


def _case(v: dict[str, Any]) -> dict[str, Any] | None:
    """One vector as a NodeFeatureRule and a NodeFeature (None: not expressible)."""
    if v["kind"] == "custom_validate" and v["op"] == "":
        return None  # Go's internal MatchAny: not in the CRD's op enum
    rule, features = vector_rule(v)
    doc = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "vectors"},
        "spec": {"rules": [rule]},
    }
    return {"rules": [doc], "features": {"spec": {"features": features}}}


def test_vectors_agree_three_ways() -> None:
    usable = [(v, c) for v in VECTORS if (c := _case(v)) is not None]
    assert len(VECTORS) == 127 and len(usable) >= 120
    answers = oracle_batch([c for _, c in usable])
    for (v, c), nfd in zip(usable, answers, strict=True):
        ours = nfd_gpu_case(c["rules"], c["features"])
        assert comparable(ours) == comparable(nfd), (v["id"], ours, nfd)
        if v["kind"] == "custom_validate":
            continue  # validation-time vectors: no evaluation answer to compare
        res = nfd["result"]
        exp = v["expected"]
        # NFD's code gives the answer NFD's Go test expects.
        assert bool(res["errors"]) == exp["error"], (v["id"], res)
        if not exp["error"] and "match" in exp:
            assert (res["vars"].get("matched") == "yes") == exp["match"], (v["id"], res)
            if exp["match"] and "matched" in exp:
                want = "".join(e["Name"] + "," for e in exp["matched"] or [])
                assert res["vars"]["names"] == want, (v["id"], res)
    SUMMARY.append(f"NFD test vectors: {len(usable)} of {len(VECTORS)} agree three ways")


@pytest.mark.parametrize("name", sorted(p.name for p in LOCAL_TESTDATA.iterdir()))
def test_local_testdata_agrees(name: str) -> None:
    """NFD's local-source test files: the oracle's labels equal the test parser's."""
    path = LOCAL_TESTDATA / name
    res = run_oracle("featurefile", str(path))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    content = path.read_bytes()
    if len(content) > 65536:
        want: dict[str, str] = {}
    else:
        want, _ = parse_feature_file(content, dt.datetime.now(dt.timezone.utc))
    assert got["labels"] == want
