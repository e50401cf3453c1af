"""API load of the NodeFeature sink: N simulated nodes for a simulated hour.

Every node runs the real ``NodeFeatureSink`` (real kubernetes client, real HTTP) against
``tests/k8s_api_server.py``; time is simulated (each sink gets the simulated clock), so the
hour takes seconds. Nodes start spread over the first minute, pass every 60 s, and at
minute 30 a share of the nodes gets a GPU added. A few concurrent writers bump objects to
show the 409 path. Reports requests per node per hour at steady state (after the start-up
pass; includes the jittered hourly resync GET) and writes per changed node.

    python benchmarks/api_load.py [--nodes 1000] [--changed 0.1] [--hours 1]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import kubernetes  # noqa: E402
from k8s_api_server import FakeKubeAPI  # noqa: E402

from nfd_gpu.scan import run_scan  # noqa: E402
from nfd_gpu.sinks import Publication  # noqa: E402
from nfd_gpu.sinks.nodefeature import NodeFeatureSink  # noqa: E402

NS = "nfd-gpu"


class SimClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--changed", type=float, default=0.1, help="share of nodes that change")
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    base = run_scan(os.path.join(ROOT, "tests", "fixtures", "sysfs", "hgx-h100"))
    pub = Publication(dict(base.labels), base.features)
    grown_features = copy.deepcopy(base.features)
    inst = grown_features["instances"]
    if inst:
        name = sorted(inst)[0]
        inst[name]["elements"].append(copy.deepcopy(inst[name]["elements"][0]))
    grown = Publication(
        {**base.labels, "gpu.feature.node.kubernetes.io/count": "9"}, grown_features
    )

    api = FakeKubeAPI().start()
    cfg = kubernetes.client.Configuration()
    cfg.host = api.url
    cfg.retries = 0
    cfg.connection_pool_maxsize = 4
    client = kubernetes.client.ApiClient(cfg)
    clock = SimClock()
    nodes = [f"node-{i:05d}" for i in range(args.nodes)]
    sinks = {
        n: NodeFeatureSink(
            node_name=n,
            namespace=NS,
            api_client=client,
            clock=clock,
            sleep=lambda s: None,
            rng=random.Random(rng.random()),
            owner_refs=(),
            # simulated time: the resync-GET path (a Role without 'watch'); the watch runs
            # in real time, its cost is measured by tests/hostile/test_api_faults.py and
            # tests/e2e/test_own_object.py (about 1 request per node per hour)
            watch=False,
        )
        for n in nodes
    }
    offset = {n: rng.uniform(0, args.interval) for n in nodes}
    changed = set(rng.sample(nodes, int(args.nodes * args.changed)))
    bumped = set(rng.sample(sorted(changed), max(1, len(changed) // 10)))
    change_at = 30 * 60.0

    wall0 = time.perf_counter()
    # start-up pass (minute 0)
    for n in sorted(nodes, key=offset.__getitem__):
        clock.t = offset[n]
        sinks[n].publish(pub)
    startup = dict(api.counts)
    api.reset_counts()
    errors = 0
    ticks = int(args.hours * 3600 / args.interval)
    for k in range(1, ticks + 1):
        order = sorted(nodes, key=offset.__getitem__)
        for n in order:
            clock.t = k * args.interval + offset[n]
            if n in bumped and abs(clock.t - change_at) <= args.interval / 2:
                api.bump(NS, f"nfd-gpu-{n}")  # a concurrent writer just before the change
            p = grown if (n in changed and clock.t >= change_at) else pub
            try:
                sinks[n].publish(p)
            except Exception as e:  # counted, the benchmark continues like the agent
                errors += 1
                print(f"{n}: {e}", file=sys.stderr)
    wall = time.perf_counter() - wall0
    api.stop()

    steady = dict(api.counts)
    total = sum(steady.values())
    per_node_hour = total / args.nodes / args.hours
    unchanged_nodes = [n for n in nodes if n not in changed]
    unchanged_req = sum(api.object_counts[(NS, f"nfd-gpu-{n}")] for n in unchanged_nodes)
    per_unchanged = unchanged_req / max(1, len(unchanged_nodes)) / args.hours
    # writes per changed node: successful writes only = generation bumps
    gens = [api.objects[(NS, f"nfd-gpu-{n}")]["metadata"]["generation"] - 1 for n in changed]
    unbumped = [n for n in changed if n not in bumped]
    put_req_unbumped = [api.object_counts[(NS, f"nfd-gpu-{n}")] for n in unbumped]

    rows = [
        ("nodes", f"{args.nodes}"),
        ("simulated", f"{args.hours:g} h at {args.interval:g} s intervals ({ticks} passes/node)"),
        (
            "start-up requests (all nodes)",
            ", ".join(f"{k}={v}" for k, v in sorted(startup.items())),
        ),
        (
            "steady-state requests (all nodes)",
            ", ".join(f"{k}={v}" for k, v in sorted(steady.items())),
        ),
        ("requests per node per hour (all)", f"{per_node_hour:.3f}  (target <= 2)"),
        ("requests per unchanged node per hour", f"{per_unchanged:.3f}  (resync GET only)"),
        ("changed nodes", f"{len(changed)} ({len(bumped)} with a concurrent writer)"),
        (
            "writes per changed node",
            f"{sum(gens) / max(1, len(gens)):.3f}  (target exactly 1; "
            f"min {min(gens, default=0)}, max {max(gens, default=0)})",
        ),
        (
            "requests per changed node w/o conflict",
            f"{sum(put_req_unbumped) / max(1, len(put_req_unbumped)):.3f} "
            "(1 PUT + resync GET share)",
        ),
        ("publish errors", f"{errors}"),
        ("schema rejections", f"{len(api.rejected)}"),
        ("wall time", f"{wall:.1f} s"),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'metric':<{w}}  value")
    print(f"{'-' * w}  {'-' * 40}")
    for name, value in rows:
        print(f"{name:<{w}}  {value}")
    ok = per_node_hour <= 2 and all(g == 1 for g in gens) and errors == 0 and not api.rejected
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
