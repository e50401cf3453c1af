#!/usr/bin/env python3
"""CLI start-up: ``nfd-gpu --version`` and ``nfd-gpu scan`` of the 27-function HGX H100
fixture beside the interpreter's own floor, interleaved in rounds (benchmarks/rounds.py).

Contenders, each a child process (CPU from ``wait4``), ratios to ``python -c pass`` of the
interpreter in the ``nfd-gpu`` script's ``#!`` line:

* ``python -c pass``: the interpreter and ``site``, nothing else;
* ``python -c 'import typer'``: what any command line defined with typer pays first;
* ``nfd-gpu --version`` and ``nfd-gpu scan --root tests/fixtures/sysfs/hgx-h100``;
* ``lspci -nn`` on the same tree (pciutils), where installed;
* with ``--compare OTHER``: ``OTHER --version`` and ``OTHER scan``, another regular install
  (an earlier commit, say) on the same interpreter, in the same rounds: an A/B.

    python benchmarks/cli.py [--rounds 25] [--cli /path/to/regular-venv/bin/nfd-gpu]
        [--compare /path/to/other-venv/bin/nfd-gpu]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "benchmarks"))

import rounds  # noqa: E402

FIXTURE = REPO / "tests/fixtures/sysfs/hgx-h100"


def interpreter(cli: str) -> str:
    """The Python of a console script (its ``#!`` line)."""
    with open(cli, "rb") as f:
        first = f.readline().decode(errors="replace")
    return first[2:].strip().split()[0] if first.startswith("#!") else sys.executable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--cli", default=shutil.which("nfd-gpu"), help="the nfd-gpu executable")
    ap.add_argument("--compare", help="another install's nfd-gpu, run in the same rounds")
    a = ap.parse_args()
    if not a.cli:
        raise SystemExit("nfd-gpu not found: pip install . (or --cli PATH)")
    py = interpreter(a.cli)
    kind = rounds.install_kind_of(a.cli)
    if kind == "editable":
        # its finder runs in every start of that interpreter, `python -c pass` included:
        # ~14 ms of a ~17 ms floor, which would make every ratio below look smaller
        raise SystemExit(
            f"{a.cli}: an editable install, whose import hook inflates the floor; "
            "benchmark a regular one: python3 -m venv /tmp/v && /tmp/v/bin/pip install . "
            "&& python benchmarks/cli.py --cli /tmp/v/bin/nfd-gpu"
        )
    c = {
        "python -c pass": rounds.child_process([py, "-c", "pass"]),
        "python -c 'import typer'": rounds.child_process([py, "-c", "import typer"]),
        "nfd-gpu --version": rounds.child_process([a.cli, "--version"]),
        "nfd-gpu scan (27 functions)": rounds.child_process(
            [a.cli, "scan", "--root", str(FIXTURE)]
        ),
    }
    if a.compare:
        same = os.path.realpath(interpreter(a.compare)) == os.path.realpath(py)
        if not same or rounds.install_kind_of(a.compare) == "editable":
            raise SystemExit(f"{a.compare}: not a regular install of the same interpreter as {py}")
        c["compared: --version"] = rounds.child_process([a.compare, "--version"])
        c["compared: scan (27 functions)"] = rounds.child_process(
            [a.compare, "scan", "--root", str(FIXTURE)]
        )
    lspci = shutil.which("lspci")
    if lspci:
        sysfs = f"sysfs.path={FIXTURE / 'sys/bus/pci'}"
        lspci_cmd = [lspci, "-nn", "-A", "linux-sysfs", "-O", sysfs]
        c["lspci -nn (same tree)"] = rounds.child_process(lspci_cmd)
    res = rounds.interleave(c, a.rounds)
    compared = f"; compared: {a.compare}" if a.compare else ""
    print(rounds.header(res, f"CLI start-up ({a.cli}: nfd-gpu {kind}; {py}{compared})"))
    print()
    notes = {"nfd-gpu --version": "target <= 3x", "nfd-gpu scan (27 functions)": "target <= 5x"}
    print(rounds.table(res, "python -c pass", notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
