"""Agent cost: RSS after N passes with the NodeFeature sink, and CPU time per pass.

Runs the real Agent (real scan of a fixture; real NodeFeature sink over HTTP to
tests/k8s_api_server.py) for --passes passes in-process. ``--fixture h200-vm`` is the real
H200 capture with its NVML answers replayed from ``nvml.json`` every pass; the default HGX
fixture has no recording (NVML: ``--nvml auto``, the library is asked and absent here).

    python benchmarks/agent.py [--passes 100] [--fixture hgx-h100] [--rules 1000]

``--rules N`` adds N NodeFeatureRule rules (benchmarks/rules.py's mix) read from a file
every pass, as ``--rules`` does in the agent. ``--owner-refs`` is the agent's option (default
``pod,ds``, as deployed): the sink reads its own Pod from the test API server once for the
DaemonSet owner reference; ``--owner-refs ''`` skips that lookup.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import kubernetes  # noqa: E402
import yaml  # noqa: E402
from k8s_api_server import FakeKubeAPI  # noqa: E402

from nfd_gpu.agent import Agent  # noqa: E402
from nfd_gpu.config import Config  # noqa: E402
from nfd_gpu.metrics import Metrics  # noqa: E402
from nfd_gpu.sinks.nodefeature import NodeFeatureSink  # noqa: E402


def rss_bytes() -> int:
    """Current resident set size (Linux)."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def write_rules(n: int, path: str) -> int:
    """Write ``n`` rules of benchmarks/rules.py's mix as one NodeFeatureRule to ``path``."""
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=100)
    ap.add_argument("--fixture", default="hgx-h100")
    ap.add_argument("--rules", type=int, default=0, help="NodeFeatureRule rules to apply")
    ap.add_argument(
        "--owner-refs", default="pod,ds", help="owner references, as the agent's option"
    )
    ap.add_argument("--write-rules", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_rules:
        return write_rules(args.rules, args.write_rules)
    rules_path = None
    if args.rules:
        # Written by a child process: building and dumping 1,000 rules here would grow
        # this process's RSS, which is what the benchmark measures.
        fd, rules_path = tempfile.mkstemp(prefix="nfd-gpu-bench-", suffix=".yaml")
        os.close(fd)
        cmd = [sys.executable, __file__, "--rules", str(args.rules), "--write-rules", rules_path]
        subprocess.run(cmd, check=True)
    api = FakeKubeAPI().start()
    ds_owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "ds-uid"}
    api.add_pod("nfd-gpu", "nfd-gpu-bench", "pod-uid", [ds_owner])
    owner_refs = tuple(k for k in args.owner_refs.split(",") if k)
    cfg_k = kubernetes.client.Configuration()
    cfg_k.host = api.url
    cfg_k.retries = 0
    root = os.path.join(ROOT, "tests", "fixtures", "sysfs", args.fixture)
    cfg = Config(
        root=root,
        outputs=("nodefeature",),
        node_name="bench",
        namespace="nfd-gpu",
        rules=rules_path,
    )
    sink = NodeFeatureSink(
        node_name="bench",
        namespace="nfd-gpu",
        api_client=kubernetes.client.ApiClient(cfg_k),
        owner_refs=owner_refs,
        pod_name="nfd-gpu-bench",
        pod_uid="pod-uid",
    )
    agent = Agent(cfg, sinks=[sink], metrics=Metrics())
    agent.run_pass()  # warm-up: imports, owner lookup, create
    obj = api.get("nfd-gpu", "nfd-gpu-bench")
    assert obj is not None
    kinds = [r["kind"] for r in obj["metadata"].get("ownerReferences", [])]
    cpu: list[float] = []
    for _ in range(args.passes):
        c0 = time.process_time()
        assert agent.run_pass()
        cpu.append(time.process_time() - c0)
    rss = rss_bytes() / 2**20
    api.stop()
    if rules_path:
        os.unlink(rules_path)
    cpu.sort()
    med = cpu[len(cpu) // 2] * 1000
    p95 = cpu[int(len(cpu) * 0.95)] * 1000
    rows = [
        ("fixture", args.fixture),
        ("passes", str(args.passes)),
        ("rules", str(args.rules)),
        ("owner references", ",".join(kinds) or "none"),
        ("API writes", f"{api.writes()} (create at warm-up only)"),
        ("RSS after passes", f"{rss:.1f} MB (target < 80 MB)"),
        ("CPU per pass, median", f"{med:.2f} ms (target < 15 ms)"),
        ("CPU per pass, p95", f"{p95:.2f} ms"),
    ]
    w = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{w}}  {value}")
    return 0 if rss < 80 and med < 15 else 1


if __name__ == "__main__":
    sys.exit(main())
