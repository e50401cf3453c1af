"""Agent start-up cost: CPU-seconds and wall time from exec to the first publish.

Runs the ``nfd-gpu`` console entry (pyproject.toml) as the DaemonSet does (``run`` with the
shipped rules, the NodeFeature output, JSON logs, metrics on) but ``--oneshot``: the process
ends after its first publish, so its CPU time (user + system, from ``wait4``) is what a pod
spends before it can be Ready. The NodeFeature goes to tests/k8s_api_server.py on loopback.
At a CPU limit of L cores a start costs at least CPU / L seconds (the CFS quota): the
shipped limit and readiness probe are chosen from this (docs/install.md "Resources").

Two client configurations, one run of each per round (the order alternating):

* ``in-cluster``, as in a pod: the client's own ``load_incluster_config`` (the
  ``KUBERNETES_SERVICE_HOST``/``PORT`` environment, the service-account token and CA files),
  over HTTPS to the test server with a certificate made for the run (``openssl``); the
  harness points the loader's two file names at the run's files before the entry starts
  (the loader's module is imported there, as the agent imports it, with the cyclic garbage
  collector off, as the entry turns it off first: nfd_gpu/entry.py);
* ``kubeconfig``: ``--kubeconfig`` (a host run): the client's kubeconfig reader
  (requests-oauthlib, the ``ApiClient`` with pydantic) is imported too.

The child imports nfd-gpu from this tree, its bytecode compiled first (as an install does).

Each round also runs ``python -c pass`` (the interpreter's own start, the floor): its
median says how fast the machine ran, and each start's CPU is divided by the floor of its
own round (the ratio column), so runs on a slower or busier machine compare.

With ``--compare TREE`` (another checkout, an earlier commit say) a third setup runs in the
same rounds: ``in-cluster`` with nfd-gpu imported from TREE, an A/B on one machine.

    python benchmarks/startup.py [--rounds 10] [--fixture hgx-h100] [--compare TREE]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(1, os.path.join(ROOT, "benchmarks"))

import rounds  # noqa: E402

from tests.agent_process import agent_env, console_argv  # noqa: E402
from tests.k8s_api_server import FakeKubeAPI  # noqa: E402

# The in-cluster child: the loader's file names pointed at the run's, then the entry. The
# collector is off for these imports as for the agent's own (the entry's first step).
IN_CLUSTER = (
    "import gc, os, sys; gc.disable(); "
    "from nfd_gpu.sinks.kubeclient import client_modules; client_modules(); "
    "import kubernetes.config.incluster_config as ic; "
    "ic.SERVICE_TOKEN_FILENAME = os.environ['BENCH_TOKEN_FILE']; "
    "ic.SERVICE_CERT_FILENAME = os.environ['BENCH_CA_FILE']; "
    "from nfd_gpu.entry import console; sys.exit(console())"
)


def one_start(argv: list[str], args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``run --oneshot`` to its first publish."""
    t0 = time.monotonic()
    proc = subprocess.Popen([*argv, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"agent failed ({proc.returncode}): {err.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def _spread(values: list[float]) -> tuple[float, float]:
    """p10 and p90 of ``values``, as every benchmark's tables (rounds.quantile)."""
    return rounds.quantile(values, 0.1), rounds.quantile(values, 0.9)


def server_cert(tmp: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    cert, key = os.path.join(tmp, "server.crt"), os.path.join(tmp, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)  # fmt: skip
    return cert, key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--fixture", default="hgx-h100")
    ap.add_argument("--compare", metavar="TREE", help="another checkout, in-cluster beside")
    a = ap.parse_args()
    if a.compare:  # from where it was typed; a tree without nfd_gpu would be this one again
        a.compare = os.path.abspath(a.compare)
        if not os.path.isfile(os.path.join(a.compare, "nfd_gpu", "__init__.py")):
            raise SystemExit(f"--compare {a.compare}: no nfd_gpu package there")
    os.chdir(ROOT)  # agent_env puts the working directory first on the child's PYTHONPATH
    # the tree's bytecode first, as an install compiles it: with PYTHONDONTWRITEBYTECODE set
    # (or a stale __pycache__) every start would compile the changed modules again (~0.1 s)
    for tree in (ROOT, *([a.compare] if a.compare else [])):
        compileall.compile_dir(os.path.join(tree, "nfd_gpu"), quiet=1)
    common = ["run", "--oneshot", "--root", os.path.join(ROOT, "tests/fixtures/sysfs", a.fixture),
              "--rules", os.path.join(ROOT, "rules"), "--output", "nodefeature",
              "--log-format", "json", "--metrics-address", "127.0.0.1:0", "--no-udev"]  # fmt: skip
    runs: dict[str, list[tuple[float, float]]] = {"in-cluster": [], "kubeconfig": []}
    floor: list[float] = []  # python -c pass, one per round
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = server_cert(tmp)
        token = os.path.join(tmp, "token")
        with open(token, "w", encoding="ascii") as f:
            f.write("bench-token")
        plain, tls = FakeKubeAPI().start(), FakeKubeAPI().start(tls=(cert, key))
        try:
            kubeconfig = plain.kubeconfig(os.path.join(tmp, "kubeconfig"))
            host, port = tls.url.rsplit("/", 1)[1].split(":")
            setups = {
                "in-cluster": (
                    [sys.executable, "-c", IN_CLUSTER],
                    common,
                    agent_env(
                        NODE_NAME="bench-node",
                        POD_NAMESPACE="nfd",
                        KUBERNETES_SERVICE_HOST=host,
                        KUBERNETES_SERVICE_PORT=port,
                        BENCH_TOKEN_FILE=token,
                        BENCH_CA_FILE=cert,
                    ),
                ),
                "kubeconfig": (
                    console_argv(),
                    [*common, "--kubeconfig", kubeconfig],
                    agent_env(NODE_NAME="bench-node", POD_NAMESPACE="nfd"),
                ),
            }
            if a.compare:
                exe, args, env = setups["in-cluster"]
                # its own NodeFeature: the two trees' labels may differ
                path = os.pathsep.join([a.compare, env["PYTHONPATH"]])
                env = {**env, "PYTHONPATH": path, "NODE_NAME": "bench-node-compared"}
                setups[f"in-cluster, {a.compare}"] = (exe, args, env)
                runs[f"in-cluster, {a.compare}"] = []
            load_before = os.getloadavg()
            for r in range(a.rounds):
                floor.append(one_start([sys.executable, "-c", "pass"], [], os.environ.copy())[0])
                order = list(setups)
                for name in order[r % len(order) :] + order[: r % len(order)]:
                    runs[name].append(one_start(*setups[name]))
            load_after = os.getloadavg()
            # each configuration reached its own server: the in-cluster one with the token
            # file's bearer token, over TLS
            creates = 2 if a.compare else 1
            assert tls.counts["create"] == creates and plain.counts["create"] == 1, (
                tls.counts, plain.counts
            )  # fmt: skip
            assert set(tls.auth) == {"bearer bench-token"}, set(tls.auth)
        finally:
            plain.stop()
            tls.stop()
    print(f"start-up to first publish ({a.fixture}, shipped rules, NodeFeature), {a.rounds} "
          f"rounds, the {len(runs)} setups in turn")  # fmt: skip
    compared = f" ({a.compare} for the last setup)" if a.compare else ""
    print(
        f"load average before {', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} CPUs; "
        f"{sys.executable}; nfd-gpu imported from {ROOT}{compared} (the child's PYTHONPATH); "
        f"the floor, python -c pass: {statistics.median(floor) * 1000:.1f} ms CPU median "
        f"({min(floor) * 1000:.1f}-{max(floor) * 1000:.1f})\n"
    )
    print(
        "| client configuration | CPU s median (p10-p90) | CPU s max | CPU / python -c pass "
        "median (p10-p90) | wall s median (unthrottled) | >= s to the first publish at 100m "
        "/ 250m / 500m / 1000m |"
    )
    print("|---|---|---|---|---|---|")
    for name, got in runs.items():
        cpu = sorted(c for c, _ in got)
        wall = sorted(w for _, w in got)
        ratios = sorted(c / f for (c, _), f in zip(got, floor, strict=True))
        (p10, p90), (r10, r90) = _spread(cpu), _spread(ratios)
        at = " / ".join(f"{cpu[-1] / limit:.1f}" for limit in (0.1, 0.25, 0.5, 1.0))
        print(f"| {name} | {statistics.median(cpu):.3f} ({p10:.3f}-{p90:.3f}) | {cpu[-1]:.3f} "
              f"| {statistics.median(ratios):.1f}x ({r10:.1f}-{r90:.1f}) "
              f"| {statistics.median(wall):.3f} | {at} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
