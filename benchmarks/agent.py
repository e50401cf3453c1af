"""Agent cost: RSS after N passes with the NodeFeature sink, and CPU time per pass.

Runs the real Agent (real scan of a fixture; real NodeFeature sink over HTTP to
tests/k8s_api_server.py) for --passes passes in-process. ``--fixture h200-vm`` is the real
H200 capture with its NVML answers replayed from ``nvml.json`` every pass; the default HGX
fixture has no recording (NVML: ``--nvml auto``, the library is asked and absent here).

    python benchmarks/agent.py [--passes 100] [--fixture hgx-h100]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import kubernetes  # noqa: E402
from k8s_api_server import FakeKubeAPI  # noqa: E402

from nfd_gpu.agent import Agent, rss_bytes  # noqa: E402
from nfd_gpu.config import Config  # noqa: E402
from nfd_gpu.metrics import Metrics  # noqa: E402
from nfd_gpu.sinks.nodefeature import NodeFeatureSink  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=100)
    ap.add_argument("--fixture", default="hgx-h100")
    args = ap.parse_args()
    api = FakeKubeAPI().start()
    cfg_k = kubernetes.client.Configuration()
    cfg_k.host = api.url
    cfg_k.retries = 0
    root = os.path.join(ROOT, "tests", "fixtures", "sysfs", args.fixture)
    cfg = Config(root=root, outputs=("nodefeature",), node_name="bench", namespace="nfd-gpu")
    sink = NodeFeatureSink(
        node_name="bench",
        namespace="nfd-gpu",
        api_client=kubernetes.client.ApiClient(cfg_k),
        owner_refs=(),
    )
    agent = Agent(cfg, sinks=[sink], metrics=Metrics())
    agent.run_pass()  # warm-up: imports, create
    cpu: list[float] = []
    for _ in range(args.passes):
        c0 = time.process_time()
        assert agent.run_pass()
        cpu.append(time.process_time() - c0)
    rss = rss_bytes() / 2**20
    api.stop()
    cpu.sort()
    med = cpu[len(cpu) // 2] * 1000
    p95 = cpu[int(len(cpu) * 0.95)] * 1000
    rows = [
        ("fixture", args.fixture),
        ("passes", str(args.passes)),
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
