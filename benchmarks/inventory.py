"""``nfd-gpu inventory`` against the real kube-apiserver: N simulated nodes' objects
(tests/e2e/fleet.py: Nodes, agent Pods, NodeFeatures from fixture scans, two DRA
ResourceSlices), then the command timed as a user runs it: a fresh process, each format,
the medians of ``--runs``. Needs the binaries of tests/e2e/build.sh.

    python benchmarks/inventory.py [--nodes 1000] [--runs 5] [--budget 2.0] [--profile]

Each run reports its wall time and the CPU time of the whole exchange: the command's own
(its rusage) plus what etcd and kube-apiserver spent meanwhile (their /proc stat). On a
shared, oversubscribed machine the wall time measures the other tenants; the CPU time is
what the run costs, and bounds its wall time on an idle machine from above (the parts run
one after another at worst). Exits 1 when a format's median CPU time is over ``--budget``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
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


def server_cpu(cluster: Cluster) -> float:
    """CPU seconds etcd and kube-apiserver have used so far (/proc/<pid>/stat)."""
    total = 0
    for proc in cluster.procs:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], cluster: Cluster) -> tuple[float, float, float, str]:
    """Wall time, the command's CPU time, the servers' CPU time during it, its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0 = server_cpu(cluster)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"inventory failed ({p.returncode}): {p.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return took, cpu, server_cpu(cluster) - s0, p.stdout


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
        runs = [timed([*base, "--format", fmt], cluster) for _ in range(args.runs)]
        out = runs[-1][3]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] + r[2] for r in runs)
        over = over or cpu > args.budget
        print(
            f"{fmt:5s}: wall median {wall:.2f} s (best {min(r[0] for r in runs):.2f} s); CPU "
            f"median {cpu:.2f} s = command {statistics.median(r[1] for r in runs):.2f} s + "
            f"etcd and kube-apiserver {statistics.median(r[2] for r in runs):.2f} s; "
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
