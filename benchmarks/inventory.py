"""``nfd-gpu inventory`` against the real kube-apiserver: N simulated nodes' objects
(tests/e2e/fleet.py: Nodes, agent Pods, NodeFeatures from fixture scans, two DRA
ResourceSlices), then the command timed as a user runs it: a fresh process, each format,
the best and the median of ``--runs``. Needs the binaries of tests/e2e/build.sh.

    python benchmarks/inventory.py [--nodes 1000] [--runs 5] [--budget 2.0]

Exits 1 when the median of a format is over ``--budget`` seconds."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.e2e.cluster import BIN, Cluster, load_yaml_docs, missing_components  # noqa: E402
from tests.e2e.fleet import Fleet  # noqa: E402

NS = "nfd-gpu"


def timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"inventory failed ({p.returncode}): {p.stderr.strip()}")
    return took, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds, median per format")
    ap.add_argument("--profile", action="store_true", help="then one run in-process, profiled")
    args = ap.parse_args()
    missing = missing_components()
    if missing:
        print(f"skipped: e2e components missing (bash tests/e2e/build.sh): {missing[0]}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp)).start()
        try:
            crds = list(load_yaml_docs(BIN / "nfd-api-crds.yaml"))
            for crd in crds:
                cluster.apply(crd)
            cluster.wait_crds([c["metadata"]["name"] for c in crds])
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            t0 = time.perf_counter()
            fleet = Fleet.build(args.nodes, NS, "node-")
            fleet.create(cluster.request, workers=8)
            print(f"{args.nodes} nodes' objects created in {time.perf_counter() - t0:.1f} s")
            return measure(cluster, fleet, args)
        finally:
            cluster.stop()


def measure(cluster: Cluster, fleet: Fleet, args: argparse.Namespace) -> int:
    base = [sys.executable, "-m", "nfd_gpu.cli", "inventory"]
    base += ["--kubeconfig", str(cluster.admin_kubeconfig)]
    over = False
    for fmt in ("table", "csv", "json", "html"):
        times = []
        out = ""
        for _ in range(args.runs):
            took, out = timed([*base, "--format", fmt])
            times.append(took)
        med = statistics.median(times)
        over = over or med > args.budget
        print(
            f"{fmt:5s}: median {med:.2f} s, best {min(times):.2f} s over {args.runs} runs, "
            f"{len(out)} bytes"
        )
        if fmt == "json":
            doc = json.loads(out)
            assert doc["gpus"] == sum(fleet.totals.values()), "wrong totals"
            print(
                f"       {doc['gpus']} GPUs on {doc['nodes']} nodes, "
                f"{len(doc['findings'])} findings"
            )
    print(f"budget {args.budget:g} s: {'OVER' if over else 'met'}")
    if args.profile:
        import cProfile
        import io
        import pstats

        from nfd_gpu.cli import main as cli_main

        prof = cProfile.Profile()
        with contextlib.redirect_stdout(io.StringIO()):
            prof.runcall(cli_main, ["inventory", *base[4:], "--format", "json"])
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
