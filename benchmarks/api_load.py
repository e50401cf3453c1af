"""API load of the NodeFeature sink: N simulated nodes for a simulated hour, against the
Python fake API server and against the real kube-apiserver, side by side.

Every node runs the real ``NodeFeatureSink`` (real kubernetes client, real HTTP); time is
simulated (each sink gets the simulated clock), so the hour takes seconds. Nodes start
spread over the first minute, pass every 60 s, and at minute 30 a share of the nodes gets
a GPU added. A few concurrent writers bump objects just before the change to show the 409
path. Requests and payload bytes (request and response bodies, no HTTP headers) are counted
at the client, per node; writes per changed node are the objects' ``metadata.generation``
steps read from the server.

* ``fake``: tests/k8s_api_server.py (``--nodes``, default 1,000);
* ``real``: etcd + kube-apiserver built by tests/e2e/build.sh (tests/e2e/cluster.py: RBAC,
  NFD's CRDs applied; the sinks use the admin credentials), ``--real-nodes`` (default 200);
  skipped with a note when the binaries are missing.

    python benchmarks/api_load.py [--nodes 1000] [--real-nodes 200] [--changed 0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import kubernetes  # noqa: E402

from nfd_gpu.scan import run_scan  # noqa: E402
from nfd_gpu.sinks import Publication  # noqa: E402
from nfd_gpu.sinks.nodefeature import NodeFeatureSink, build_api_client  # noqa: E402

NS = "nfd-gpu"


class SimClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Counted:
    """Requests and payload bytes per node, counted in the client's REST layer."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.verbs: Counter[str] = Counter()
        rest = client.rest_client
        real = rest.request

        def request(method: str, url: str, *a: Any, **kw: Any) -> Any:
            body = kw.get("body")
            node = _node_of(url, body)
            self.requests[node] += 1
            self.verbs[method] += 1
            self.sent[node] += len(json.dumps(body)) if body is not None else 0
            try:
                resp = real(method, url, *a, **kw)
            except kubernetes.client.exceptions.ApiException as e:
                self.received[node] += len(e.body or b"")
                raise
            self.received[node] += len(resp.read() or b"")  # read now, kept for the caller
            return resp

        rest.request = request

    def reset(self) -> None:
        for c in (self.requests, self.sent, self.received, self.verbs):
            c.clear()


def _node_of(url: str, body: Any) -> str:
    """The node a request is for: the object name in the URL, or in a create's body."""
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    if name == "nodefeatures" and isinstance(body, dict):
        name = body.get("metadata", {}).get("name", "")
    return name.removeprefix("nfd-gpu-")


class Fake:
    """tests/k8s_api_server.py."""

    name = "fake"

    def __init__(self) -> None:
        from k8s_api_server import FakeKubeAPI

        self.api = FakeKubeAPI().start()

    def client(self) -> Any:
        cfg = kubernetes.client.Configuration()
        cfg.host = self.api.url
        cfg.retries = 0
        cfg.connection_pool_maxsize = 4
        return kubernetes.client.ApiClient(cfg)

    def bump(self, name: str) -> None:
        self.api.bump(NS, name)

    def generation(self, name: str) -> int:
        return int(self.api.objects[(NS, name)]["metadata"]["generation"])

    def rejected(self) -> int:
        return len(self.api.rejected)

    def stop(self) -> None:
        self.api.stop()


class Real:
    """etcd + kube-apiserver (tests/e2e/cluster.py) with NFD's CRDs and the namespace."""

    name = "real kube-apiserver"

    def __init__(self, workdir: Path) -> None:
        from tests.e2e.cluster import BIN, Cluster, load_yaml_docs

        self.cluster = Cluster(workdir).start()
        crds = list(load_yaml_docs(BIN / "nfd-api-crds.yaml"))
        for crd in crds:
            self.cluster.apply(crd)
        self.cluster.wait_crds([c["metadata"]["name"] for c in crds])
        self.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

    def _path(self, name: str) -> str:
        return f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/{name}"

    def client(self) -> Any:
        return build_api_client(str(self.cluster.admin_kubeconfig))

    def bump(self, name: str) -> None:
        """A concurrent writer: an annotation patched in (a new resourceVersion)."""
        patch = {"metadata": {"annotations": {"bench/concurrent-writer": str(time.time())}}}
        self.cluster.request(
            "PATCH", self._path(name), patch, content_type="application/merge-patch+json"
        )

    def generation(self, name: str) -> int:
        return int(self.cluster.request("GET", self._path(name))["metadata"]["generation"])

    def rejected(self) -> int:
        return 0  # a rejection is a publish error here

    def stop(self) -> None:
        self.cluster.stop()


def publications() -> tuple[Publication, Publication]:
    """The HGX fixture's publication, and the same with a GPU added."""
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
    return pub, grown


def simulate(server: Any, n_nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    """One simulated run against ``server``; the counts (see the module docstring)."""
    rng = random.Random(args.seed)
    pub, grown = publications()
    client = server.client()
    count = Counted(client)
    clock = SimClock()
    nodes = [f"node-{i:05d}" for i in range(n_nodes)]
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
    changed = set(rng.sample(nodes, int(n_nodes * args.changed)))
    bumped = set(rng.sample(sorted(changed), max(1, len(changed) // 10)))
    change_at = 30 * 60.0
    wall0 = time.perf_counter()
    for n in sorted(nodes, key=offset.__getitem__):  # start-up pass (minute 0)
        clock.t = offset[n]
        sinks[n].publish(pub)
    startup = (sum(count.requests.values()), sum(count.sent.values()), dict(count.verbs))
    count.reset()
    errors = 0
    ticks = int(args.hours * 3600 / args.interval)
    at_change: dict[str, tuple[int, int]] = {}  # node -> (requests, bytes) in its change pass
    for k in range(1, ticks + 1):
        for n in sorted(nodes, key=offset.__getitem__):
            before = (count.requests[n], count.sent[n] + count.received[n])
            clock.t = k * args.interval + offset[n]
            if n in bumped and abs(clock.t - change_at) <= args.interval / 2:
                server.bump(f"nfd-gpu-{n}")  # a concurrent writer just before the change
            p = grown if (n in changed and clock.t >= change_at) else pub
            try:
                sinks[n].publish(p)
            except Exception as e:  # counted, the benchmark continues like the agent
                errors += 1
                print(f"{server.name}: {n}: {e}", file=sys.stderr)
            if p is grown and n not in at_change:
                now = (count.requests[n], count.sent[n] + count.received[n])
                at_change[n] = (now[0] - before[0], now[1] - before[1])
    wall = time.perf_counter() - wall0
    gens = [server.generation(f"nfd-gpu-{n}") - 1 for n in changed]
    unchanged = [n for n in nodes if n not in changed]
    calm = [n for n in changed if n not in bumped]  # changed, no concurrent writer

    def per(nodes_: list[str], c: Counter[str]) -> float:
        return sum(c[n] for n in nodes_) / max(1, len(nodes_)) / args.hours

    return {
        "nodes": n_nodes,
        "startup": startup,
        "verbs": dict(count.verbs),
        "req": sum(count.requests.values()) / n_nodes / args.hours,
        "bytes": (sum(count.sent.values()) + sum(count.received.values())) / n_nodes / args.hours,
        "req_unchanged": per(unchanged, count.requests),
        "bytes_unchanged": per(unchanged, count.sent) + per(unchanged, count.received),
        "req_change": sum(at_change[n][0] for n in calm) / max(1, len(calm)),
        "bytes_change": sum(at_change[n][1] for n in calm) / max(1, len(calm)),
        "changed": (len(changed), len(bumped)),
        "gens": gens,
        "errors": errors,
        "rejected": server.rejected(),
        "wall": wall,
    }


@contextlib.contextmanager
def servers(args: argparse.Namespace) -> Iterator[list[tuple[Any, int]]]:
    out: list[tuple[Any, int]] = []
    with tempfile.TemporaryDirectory(prefix="nfd-gpu-api-load-") as tmp:
        try:
            out.append((Fake(), args.nodes))
            from tests.e2e.cluster import missing_components

            missing = missing_components()
            if args.real_nodes and not missing:
                out.append((Real(Path(tmp)), args.real_nodes))
            elif args.real_nodes:
                print(f"note: real kube-apiserver skipped, missing {missing[0]} (build.sh)")
            yield out
        finally:
            for s, _ in out:
                s.stop()


def table(results: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> list[str]:
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("simulated nodes", lambda r: str(r["nodes"])),
        (
            "start-up requests, all nodes",
            lambda r: f"{r['startup'][0]} ({_verbs(r['startup'][2])})",
        ),
        ("steady-state requests by verb", lambda r: _verbs(r["verbs"])),
        ("requests per node per hour (all)", lambda r: f"{r['req']:.3f}"),
        ("bytes per node per hour (all)", lambda r: f"{r['bytes']:,.0f}"),
        ("requests per unchanged node per hour", lambda r: f"{r['req_unchanged']:.3f}"),
        ("bytes per unchanged node per hour", lambda r: f"{r['bytes_unchanged']:,.0f}"),
        ("changed nodes (with a concurrent writer)", lambda r: "{} ({})".format(*r["changed"])),
        ("writes per changed node", lambda r: _gens(r["gens"])),
        ("requests in the pass of a change (no conflict)", lambda r: f"{r['req_change']:.3f}"),
        ("bytes in the pass of a change (no conflict)", lambda r: f"{r['bytes_change']:,.0f}"),
        ("publish errors / schema rejections", lambda r: f"{r['errors']} / {r['rejected']}"),
        ("wall time", lambda r: f"{r['wall']:.1f} s"),
    ]
    head = "| metric | " + " | ".join(name for name, _ in results) + " |"
    lines = [
        f"{args.hours:g} simulated hour(s) at {args.interval:g} s intervals, "
        f"{args.changed:.0%} of the nodes change at minute 30; bytes: request and response "
        "bodies counted at the client\n",
        head,
        "|---" * (len(results) + 1) + "|",
    ]
    for label, fn in rows:
        lines.append(f"| {label} | " + " | ".join(fn(r) for _, r in results) + " |")
    return lines


def _verbs(v: dict[str, int]) -> str:
    return ", ".join(f"{k}={n}" for k, n in sorted(v.items())) or "none"


def _gens(gens: list[int]) -> str:
    mean = sum(gens) / max(1, len(gens))
    return f"{mean:.3f} (min {min(gens, default=0)}, max {max(gens, default=0)})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000, help="nodes against the fake server")
    ap.add_argument("--real-nodes", type=int, default=200, help="nodes against kube-apiserver")
    ap.add_argument("--changed", type=float, default=0.1, help="share of nodes that change")
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    results = []
    with servers(args) as running:
        for server, n in running:
            results.append((server.name, simulate(server, n, args)))
    print("\n".join(table(results, args)))
    ok = all(
        r["req"] <= 2 and all(g == 1 for g in r["gens"]) and not r["errors"] and not r["rejected"]
        for _, r in results
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
