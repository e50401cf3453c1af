"""Agent cost: CPU and wall time per pass, interleaved, and resident memory per setup.

Runs the real Agent in-process (real scan of a fixture; the real NodeFeature sink over
HTTP to tests/k8s_api_server.py), one pass of every setup per round, the order rotated
each round (benchmarks/rounds.py), after one warm-up pass each:

* ``h200-vm``: the real H200 capture, its NVML answers replayed from ``nvml.json``;
* ``hgx-h100``: the 8-GPU HGX fixture (no NVML recording: the library is asked, absent);
* ``hgx-h100 + N rules``: with ``--rules`` N NodeFeatureRule rules (benchmarks/rules.py's
  mix, default 1,000) read from a file every pass, as the agent does: the rule output is
  reused while the features and the rule set are unchanged (nfd_gpu/scan.py);
* ``... rules evaluated every pass``: the same by an agent whose scans keep no rule output
  (each agent owns its reuse), i.e. what a pass costs when every feature or the rules
  changed (a full evaluation);
* ``... a GPU's link changed every pass`` (with and without the rules): the agent's scans
  alternate between the fixture and a copy in which one GPU's PCIe link trained at x8, so
  every pass finds changed features (and writes the NodeFeature): the rules the change
  reaches run again (``rules.memo.RuleMemo``), the others' results are reused.

Ratios are to ``hgx-h100`` (an unchanged pass without rules).

Then the resident set size (``/proc/self/statm``) of one fresh process per setup after
``--passes`` passes (feature file only; feature file as the Helm chart ships it, with the
start-up check for a stale NodeFeature, ``retire_outputs``; NodeFeature; NodeFeature with
the rules),
``--rss-rounds`` processes each, interleaved: median and range.

    python benchmarks/agent.py [--rounds 200] [--rules 1000] [--passes 100] [--rss-only]

``--owner-refs`` is the agent's option (default ``pod,ds``, as deployed): the sink reads its
own Pod from the test API server once for the DaemonSet owner reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(1, os.path.join(ROOT, "benchmarks"))
if importlib.util.find_spec("nfd_gpu") is None:  # not installed: the source tree
    sys.path.insert(0, ROOT)

import rounds  # noqa: E402

# featurefile+stale-check: the chart's default agent, a feature file output with the pod's
# credentials, so it checks once at start for a NodeFeature an earlier output left
SETUPS = ("featurefile", "featurefile+stale-check", "nodefeature", "nodefeature+rules")


def kubeconfig_for(url: str) -> dict[str, Any]:
    """A kubeconfig for the test API server at ``url``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": url}}],
        "users": [{"name": "bench", "user": {"token": "bench"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        "current-context": "bench",
    }


def rss_bytes() -> int:
    """Current resident set size (Linux)."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def write_rules(n: int, path: str) -> int:
    """Write ``n`` rules of benchmarks/rules.py's mix as one NodeFeatureRule to ``path``."""
    import yaml

    spec = importlib.util.spec_from_file_location(
        "bench_rules", os.path.join(ROOT, "benchmarks", "rules.py")
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "bench"},
        "spec": {"rules": mod.make_rules(n)},
    }
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(doc, f)
    return 0


def rules_file(n: int) -> str:
    """``n`` rules written by a child process: building and dumping 1,000 rules here would
    grow this process's RSS, which is what the benchmark measures."""
    fd, path = tempfile.mkstemp(prefix="nfd-gpu-bench-", suffix=".yaml")
    os.close(fd)
    cmd = [sys.executable, __file__, "--rules", str(n), "--write-rules", path]
    subprocess.run(cmd, check=True)
    return path


def serve_api() -> int:
    """The test API server with the agent's Pod, in this process until stdin closes: its URL
    on stdout, then its write count. A process of its own, so that neither its CPU time
    nor its memory (jsonschema, the CRD schema) is counted as the agent's."""
    from k8s_api_server import FakeKubeAPI

    server = FakeKubeAPI().start()
    ds_owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "d"}
    server.add_pod("nfd-gpu", "nfd-gpu-bench", "pod-uid", [ds_owner])
    print(server.url, flush=True)
    sys.stdin.read()
    print(server.writes(), flush=True)
    server.stop()
    return 0


class ApiServer:
    """:func:`serve_api` in a child process."""

    def __init__(self) -> None:
        cmd = [sys.executable, __file__, "--serve-api"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stop(self) -> int:
        """Stop it; the number of writes it took."""
        out, _ = self.proc.communicate("", timeout=30)
        return int(out.strip() or 0)


class Api:
    """A kubernetes client configuration for the API server at ``url``, made of the modules
    the agent imports in a pod (``nfd_gpu.sinks.kubeclient.client_modules``: what
    ``build_api_client`` loads for an in-cluster configuration, whose loader sets the host
    and token as here), so the RSS below is the deployed agent's."""

    def __init__(self, url: str) -> None:
        from nfd_gpu.sinks.kubeclient import client_modules

        self.cfg = client_modules().Configuration()
        self.cfg.host = url
        self.cfg.api_key["authorization"] = "bearer bench"  # read by both client generations
        self.cfg.retries = 0

    def client(self) -> Any:
        from nfd_gpu.sinks.kubeclient import client_for

        return client_for(self.cfg)


def make_agent(
    fixture: str,
    node: str,
    *,
    rules: str | None,
    api: Api | None,
    owner_refs: str,
    out: str,
    reuse: bool = True,
    alternate: str | None = None,
) -> Any:
    """An Agent on ``fixture`` publishing a NodeFeature for ``node`` (``api``) or, without
    ``api``, a feature file under ``out``. ``reuse=False``: its scans evaluate the rules in
    full every pass (they get no :class:`~nfd_gpu.scan.RuleOutputs`), as after a change.
    ``alternate``: a second host root, scanned every other pass (changed features)."""
    from nfd_gpu.agent import Agent
    from nfd_gpu.agent.metrics import Metrics
    from nfd_gpu.config.loader import Config
    from nfd_gpu.scan import run_scan

    def evaluating(root: str, rule_outputs: object = None, **kwargs: Any) -> Any:
        return run_scan(root, **kwargs)

    scan: Any = None if reuse else evaluating
    root = os.path.join(ROOT, "tests", "fixtures", "sysfs", fixture)
    if alternate is not None:
        roots = itertools.cycle([alternate, root])

        def alternating(_root: str, **kwargs: Any) -> Any:
            return run_scan(next(roots), **kwargs)

        scan = alternating
    if api is None:
        cfg = Config(root=root, outputs=("featurefile",), features_dir=out, rules=rules)
        return Agent(cfg, scan=scan, metrics=Metrics())
    from nfd_gpu.sinks.nodefeature import NodeFeatureSink

    cfg = Config(
        root=root, outputs=("nodefeature",), node_name=node, namespace="nfd-gpu", rules=rules
    )
    sink = NodeFeatureSink(
        node_name=node,
        namespace="nfd-gpu",
        api_client=api.client(),
        owner_refs=tuple(k for k in owner_refs.split(",") if k),
        pod_name="nfd-gpu-bench",
        pod_uid="pod-uid",
    )
    return Agent(cfg, scan=scan, sinks=[sink], metrics=Metrics())


def degraded_copy(tmp: str) -> str:
    """A copy of the hgx-h100 fixture whose first GPU's link trained at x8."""
    dest = os.path.join(tmp, "hgx-h100-x8")
    shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "sysfs", "hgx-h100"), dest,
                    symlinks=True)  # fmt: skip
    devices = os.path.join(dest, "sys", "bus", "pci", "devices")
    for name in sorted(os.listdir(devices)):
        d = os.path.realpath(os.path.join(devices, name))
        with open(os.path.join(d, "class"), encoding="ascii") as f:
            if f.read().strip().startswith("0x0302"):
                with open(os.path.join(d, "current_link_width"), "w", encoding="ascii") as w:
                    w.write("8\n")
                return dest
    raise RuntimeError("no GPU in hgx-h100")


def passes(args: argparse.Namespace, rules: str) -> int:
    """The interleaved CPU / wall table of one pass per setup."""
    server = ApiServer()
    api = Api(server.url)
    n = args.rules
    x8 = degraded_copy(args.tmp)
    agents = {
        "h200-vm": make_agent("h200-vm", "h200", rules=None, api=api, **_common(args)),
        "hgx-h100": make_agent("hgx-h100", "hgx", rules=None, api=api, **_common(args)),
        f"hgx-h100 + {n} rules": make_agent(
            "hgx-h100", "hgx-rules", rules=rules, api=api, **_common(args)
        ),
        f"hgx-h100 + {n} rules evaluated every pass": make_agent(
            "hgx-h100", "hgx-eval", rules=rules, api=api, reuse=False, **_common(args)
        ),
        "hgx-h100, a GPU's link changed every pass": make_agent(
            "hgx-h100", "hgx-alt", rules=None, api=api, alternate=x8, **_common(args)
        ),
        f"hgx-h100 + {n} rules, a GPU's link changed every pass": make_agent(
            "hgx-h100", "hgx-alt-rules", rules=rules, api=api, alternate=x8, **_common(args)
        ),
    }

    def one(name: str) -> Any:
        agent = agents[name]

        def run() -> None:
            assert agent.run_pass()

        return rounds.in_process(run)

    res = rounds.interleave({name: one(name) for name in agents}, args.rounds)
    writes = server.stop()
    print(rounds.header(res, "agent passes"))
    print(f"API writes: {writes} (the {len(agents)} creates, then one per changed pass)\n")
    notes = {name: _p95(res.cpu(name)) for name in agents}
    print(rounds.table(res, "hgx-h100", notes))
    return 0


def _common(args: argparse.Namespace) -> dict[str, str]:
    return {"owner_refs": args.owner_refs, "out": args.tmp}


def _p95(cpu: list[float]) -> str:
    return f"CPU p95 {rounds.quantile(cpu, 0.95) * 1000:.2f} ms"


def child(args: argparse.Namespace) -> int:
    """One setup in this (fresh) process: ``--passes`` passes, then print the RSS."""
    api = None if args.child.startswith("featurefile") else Api(args.url)
    rules = args.rules_file if args.child == "nodefeature+rules" else None
    agent = make_agent("hgx-h100", "rss", rules=rules, api=api, **_common(args))
    if args.child == "featurefile+stale-check":
        from nfd_gpu.agent.startup import retire_outputs
        from nfd_gpu.config.loader import Config

        kubeconfig = os.path.join(args.tmp, "kubeconfig")
        with open(kubeconfig, "w", encoding="utf-8") as f:
            json.dump(kubeconfig_for(args.url), f)  # JSON is YAML
        cfg = Config(outputs=("featurefile",), node_name="rss", namespace="nfd-gpu",
                     kubeconfig=kubeconfig)  # fmt: skip
        retire_outputs(cfg)
    for _ in range(args.passes + 1):
        assert agent.run_pass()
    print(json.dumps({"rss": rss_bytes()}))
    return 0


def memory(args: argparse.Namespace, rules: str) -> None:
    out: dict[str, list[float]] = {s: [] for s in SETUPS}
    load_before = os.getloadavg()
    server = ApiServer()
    python = args.python or sys.executable
    try:
        for r in range(args.rss_rounds):
            k = r % len(SETUPS)
            for s in SETUPS[k:] + SETUPS[:k]:
                cmd = [python, __file__, "--child", s, "--rules-file", rules, "--url", server.url]
                cmd += ["--passes", str(args.passes), "--owner-refs", args.owner_refs]
                cmd += ["--tmp", args.tmp]
                p = subprocess.run(cmd, check=True, capture_output=True, text=True)
                out[s].append(json.loads(p.stdout.strip().splitlines()[-1])["rss"] / 2**20)
    finally:
        server.stop()
    kind = rounds.install_kind_of_python(python)
    print(
        f"\nRSS after {args.passes} passes (hgx-h100), one fresh process each ({python}: "
        f"nfd-gpu {kind}), {args.rss_rounds} rounds interleaved; the API server is a "
        "process of its own; load average before "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs\n"
    )
    print("| setup | RSS MB median (min-max) |\n|---|---|")
    for s in SETUPS:
        label = s.replace("+rules", f" + {args.rules} rules")
        v = out[s]
        print(f"| {label} | {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f}) |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200, help="passes per setup, interleaved")
    ap.add_argument("--rules", type=int, default=1000, help="NodeFeatureRule rules to apply")
    ap.add_argument("--passes", type=int, default=100, help="passes before RSS is read")
    ap.add_argument("--rss-rounds", type=int, default=3)
    ap.add_argument("--rss-only", action="store_true", help="only the RSS table")
    ap.add_argument(
        "--owner-refs", default="pod,ds", help="owner references, as the agent's option"
    )
    ap.add_argument("--write-rules", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=SETUPS, help=argparse.SUPPRESS)
    ap.add_argument("--rules-file", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--serve-api", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--python",
        help="interpreter of the RSS processes (e.g. a regular install's, without the test "
        "extras: kubernetes imports kubernetes-validate when it is installed)",
    )
    args = ap.parse_args()
    if args.write_rules:
        return write_rules(args.rules, args.write_rules)
    if args.serve_api:
        return serve_api()
    if args.child:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="nfd-gpu-bench-") as tmp:
        args.tmp = tmp
        rules = rules_file(args.rules)
        try:
            if not args.rss_only:
                passes(args, rules)
            memory(args, rules)
        finally:
            os.unlink(rules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
