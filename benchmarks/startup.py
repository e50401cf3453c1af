"""Agent start-up cost: CPU-seconds and wall time from exec to the first publish.

Runs the ``nfd-gpu`` console entry (pyproject.toml) as the DaemonSet does (``run`` with the
shipped rules, the NodeFeature output, JSON logs, metrics on) but ``--oneshot``: the process
ends after its first publish, so its CPU time (user + system, from ``wait4``) is what a pod
spends before it can be Ready. The NodeFeature goes to tests/k8s_api_server.py on loopback.
At a CPU limit of L cores a start costs at least CPU / L seconds (the CFS quota): the
shipped limit and readiness probe are chosen from this (docs/install.md "Resources").

    python benchmarks/startup.py [--rounds 10] [--fixture hgx-h100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.agent_process import agent_env, console_argv  # noqa: E402
from tests.k8s_api_server import running  # noqa: E402


def one_start(kubeconfig: str, fixture: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``run --oneshot`` to its first publish."""
    args = ["run", "--oneshot", "--root", os.path.join(ROOT, "tests/fixtures/sysfs", fixture),
            "--rules", os.path.join(ROOT, "rules"), "--output", "nodefeature",
            "--kubeconfig", kubeconfig, "--log-format", "json",
            "--metrics-address", "127.0.0.1:0", "--no-udev"]  # fmt: skip
    env = agent_env(NODE_NAME="bench-node", POD_NAMESPACE="nfd")
    t0 = time.monotonic()
    proc = subprocess.Popen([*console_argv(), *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"agent failed ({proc.returncode}): {err.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--fixture", default="hgx-h100")
    a = ap.parse_args()
    with running() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.kubeconfig(os.path.join(tmp, "kubeconfig"))
        runs = [one_start(kubeconfig, a.fixture) for _ in range(a.rounds)]
    cpu = sorted(c for c, _ in runs)
    wall = sorted(w for _, w in runs)
    print(f"start-up to first publish ({a.fixture}, shipped rules, NodeFeature), {a.rounds} runs")
    print(f"  CPU:  median {statistics.median(cpu):.3f} s, max {cpu[-1]:.3f} s")
    print(f"  wall: median {statistics.median(wall):.3f} s (unthrottled)")
    for limit in (0.1, 0.25, 0.5, 1.0):
        print(f"  at a {limit * 1000:.0f}m limit: >= {cpu[-1] / limit:.1f} s to the first publish")
    return 0


if __name__ == "__main__":
    sys.exit(main())
