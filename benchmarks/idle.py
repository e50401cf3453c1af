"""Idle cost: CPU per minute of the agent between passes, metrics on, beside a sleeping peer.

Starts the real agent (``nfd-gpu run`` as a process: feature-file output, the
``hgx-h100`` fixture, ``--metrics-address`` on loopback, ``--interval 3600`` so no pass
falls in the windows) and a peer that only sleeps (``python -c "import time;
time.sleep(...)"``, the floor any idle process pays: nothing). After the agent's first
pass (``/readyz`` 200) and a settling second, both are measured over the same
``--window`` seconds, ``--rounds`` times, the order of reading rotated each round: CPU
is the sum over every thread of ``/proc/<pid>/task/<tid>/schedstat``'s time on CPU (ns,
not clock ticks: 3 ms is below a tick per second). Printed: per-round ms/minute for
each, median and p10-p90, the difference agent - peer, and the load before and after.

    python benchmarks/idle.py [--rounds 6] [--window 10]

Target (issue 37): agent <= 3 ms CPU per minute.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import rounds  # noqa: E402

TARGET_MS_PER_MIN = 3.0


def cpu_ns(pid: int) -> int:
    """Time on CPU of every thread of ``pid`` (ns), the exited ones' included via the
    process's own schedstat where the kernel keeps it."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("idle.py: the agent did not become ready")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=10.0, help="seconds per round")
    args = ap.parse_args()

    port = free_port()
    tmp = tempfile.mkdtemp(prefix="nfd-gpu-idle-")
    agent_cmd = [
        sys.executable, "-m", "nfd_gpu.cli", "run", "--no-udev", "--interval", "3600",
        "--root", os.path.join(ROOT, "tests", "fixtures", "sysfs", "hgx-h100"),
        "--output", "featurefile", "--features-dir", tmp, "--expiry", "86400",
        "--metrics-address", f"127.0.0.1:{port}",
    ]  # fmt: skip
    peer_cmd = [sys.executable, "-c", "import time; time.sleep(86400)"]
    procs = {
        "agent (metrics on)": subprocess.Popen(agent_cmd, stderr=subprocess.DEVNULL),
        "peer: python sleeping": subprocess.Popen(peer_cmd),
    }
    try:
        wait_ready(port)
        time.sleep(1.0)
        names = list(procs)
        per_min: dict[str, list[float]] = {n: [] for n in names}
        load_before = os.getloadavg()
        for r in range(args.rounds):
            order = names[r % 2 :] + names[: r % 2]
            start = {n: cpu_ns(procs[n].pid) for n in order}
            t0 = time.monotonic()
            time.sleep(args.window)
            end = {n: cpu_ns(procs[n].pid) for n in order}
            minutes = (time.monotonic() - t0) / 60.0
            for n in names:
                per_min[n].append((end[n] - start[n]) / 1e6 / minutes)
        load_after = os.getloadavg()
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(10)

    print(f"idle CPU, {args.rounds} rounds of {args.window:g} s, both measured in the same windows")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
          f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}")  # fmt: skip
    print(f"{'process':<24} {'ms CPU/min median':>18} {'p10-p90':>16}  per round")
    for n in names:
        v = per_min[n]
        print(f"{n:<24} {rounds.quantile(v, 0.5):>18.3f} "
              f"{rounds.quantile(v, 0.1):>7.3f}-{rounds.quantile(v, 0.9):<8.3f} "
              f"{' '.join(f'{x:.2f}' for x in v)}")  # fmt: skip
    agent, peer = per_min[names[0]], per_min[names[1]]
    diff = [a - b for a, b in zip(agent, peer, strict=True)]
    lo, mid, hi = (rounds.quantile(diff, q) for q in (0.1, 0.5, 0.9))
    print(f"agent - peer, per round: median {mid:.3f} ms/min (p10-p90 {lo:.3f}-{hi:.3f})")
    med = rounds.quantile(agent, 0.5)
    verdict = "met" if med <= TARGET_MS_PER_MIN else "NOT met"
    print(f"target: agent <= {TARGET_MS_PER_MIN:g} ms CPU per minute: {verdict} ({med:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
