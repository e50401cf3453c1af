"""Differential run, nfd-gpu's rule engine against NFD's (nfd-oracle), as its
own process: ``python -m tests.e2e.differential SEED CASES``.

Hypothesis generates one case per example (``rulegen.case``), one oracle
process answers every case over a pipe, a disagreement fails with the shrunk
case. It runs apart from the pytest process because Hypothesis' bookkeeping for
thousands of large examples would otherwise stay in that process's memory.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from tests.e2e import rulegen
from tests.e2e.oracle import OracleProcess, comparable, nfd_gpu_case


def run(seed_value: int, cases: int) -> int:
    """Check ``cases`` generated cases; return how many agreed (all, or raise)."""
    proc = OracleProcess()
    count = 0

    @seed(seed_value)
    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(rulegen.case())
    def check(case: dict[str, Any]) -> None:
        nonlocal count
        theirs = proc.ask(case)
        ours = nfd_gpu_case(case["rules"], case["features"])
        count += 1
        if comparable(ours) != comparable(theirs):
            raise AssertionError(
                "nfd-gpu and NFD disagree\ncase: "
                + json.dumps(case)
                + "\nnfd-gpu: "
                + json.dumps(ours)
                + "\nNFD: "
                + json.dumps(theirs)
            )

    try:
        check()
    finally:
        proc.close()
    return count


def main(argv: list[str]) -> int:
    seed_value, cases = int(argv[0]), int(argv[1])
    started = time.monotonic()
    n = run(seed_value, cases)
    print(f"{n} {time.monotonic() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
