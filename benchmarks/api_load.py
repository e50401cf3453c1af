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

``--peers N``: beside them, on the fake server, N simulated nodes of each peer's publishing
loop as its code does it, through the same counted client: NFD v0.19.0's nfd-worker
(``updateNodeFeatureObject``: every sleep interval, default 60 s, one GET of its
NodeFeature, an update only when it differs; its object holds NFD's features, here the
fixture's ``pci.device`` and ``kernel.*`` and its labels, a lower bound of a real worker's,
which adds cpu, memory, system, ...) and GFD v0.20.0 (``nodeFeatureObject.Output``: the
same loop on ``nvidia-features-for-<node>`` holding its labels only; with the older
features.d file output GFD sends nothing and nfd-worker's object carries its labels).

``--watches N`` (real kube-apiserver only): the server's resident memory (``VmRSS``) before
and after N held watches of one NodeFeature each by name (the agent's own-object watch,
one TLS connection each, as the Python client holds it), and per watch.

    python benchmarks/api_load.py [--nodes 1000] [--real-nodes 200] [--changed 0.1]
                                  [--peers 200] [--watches 1000]
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

    def cpu(self) -> float | None:
        return None  # in this process: not the server's alone

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

    def cpu(self) -> float | None:
        """CPU seconds kube-apiserver and etcd have used (``/proc/<pid>/stat``)."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for proc in self.cluster.procs:
            with open(f"/proc/{proc.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        return total

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
    cpu0 = server.cpu()
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
    cpu = _cpu_per_node_hour(server, cpu0, n_nodes, args)
    gens = [server.generation(f"nfd-gpu-{n}") - 1 for n in changed]
    unchanged = [n for n in nodes if n not in changed]
    calm = [n for n in changed if n not in bumped]  # changed, no concurrent writer

    return _result(
        args, n_nodes, startup, count, unchanged, [at_change[n] for n in calm],
        (len(changed), len(bumped)), gens, errors, server.rejected(), wall, cpu,
    )  # fmt: skip


def _result(
    args: argparse.Namespace,
    n_nodes: int,
    startup: Any,
    count: Any,
    unchanged: list[str],
    changes: list[tuple[float, float]],
    changed: tuple[int, int],
    gens: list[int],
    errors: Any,
    rejected: Any,
    wall: float,
    cpu: Any,
) -> dict[str, Any]:
    """One run's figures per node and hour, as both runs (agents, peers) report them."""

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
        "req_change": sum(r for r, _ in changes) / max(1, len(changes)),
        "bytes_change": sum(b for _, b in changes) / max(1, len(changes)),
        "changed": changed,
        "gens": gens,
        "errors": errors,
        "rejected": rejected,
        "wall": wall,
        "cpu": cpu,
    }


class PollingPeer:
    """One node of a peer that polls its object (the module docstring): GET every pass,
    create when missing, update (with the read ``resourceVersion``) when it differs."""

    def __init__(self, client: Any, name: str) -> None:
        self.api = kubernetes.client.CustomObjectsApi(client)
        self.name = name

    def publish(self, spec: dict[str, Any]) -> None:
        args = ("nfd.k8s-sigs.io", "v1alpha1", NS, "nodefeatures")
        try:
            obj = self.api.get_namespaced_custom_object(*args, self.name)
        except kubernetes.client.exceptions.ApiException as e:
            if e.status != 404:
                raise
            body = {
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeature",
                "metadata": {"name": self.name, "namespace": NS},
                "spec": spec,
            }
            self.api.create_namespaced_custom_object(*args, body)
            return
        if obj.get("spec") != spec:
            obj["spec"] = spec
            self.api.replace_namespaced_custom_object(*args, self.name, obj)


def peer_specs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per peer, the spec it publishes for the HGX fixture and the same with a GPU added."""
    root = os.path.join(ROOT, "tests", "fixtures", "sysfs", "hgx-h100")
    scan = run_scan(root)
    nfd_features = {
        kind: {k: v for k, v in scan.features[kind].items() if not k.startswith("gpu.")}
        for kind in ("flags", "attributes", "instances")
    }
    nfd_labels = {"feature.node.kubernetes.io/pci-10de.present": "true",
                  "feature.node.kubernetes.io/pci-1a03.present": "true"}  # fmt: skip
    grown_features = copy.deepcopy(nfd_features)
    pci = grown_features["instances"]["pci.device"]["elements"]
    pci.append(copy.deepcopy(pci[0]))
    gfd = run_scan(root, profiles=("nvidia",)).labels
    gfd_grown = {**gfd, "nvidia.com/gpu.count": "9"}
    empty: dict[str, Any] = {"flags": {}, "attributes": {}, "instances": {}}
    return {
        "nfd-worker v0.19.0 loop": (
            {"features": nfd_features, "labels": nfd_labels},
            {"features": grown_features, "labels": nfd_labels},
        ),
        "GFD v0.20.0 loop (NodeFeature API)": (
            {"features": empty, "labels": gfd},
            {"features": empty, "labels": gfd_grown},
        ),
    }


def _cpu_per_node_hour(server: Any, cpu0: float | None, n_nodes: int, args: Any) -> float | None:
    cpu1 = server.cpu()
    if cpu0 is None or cpu1 is None:
        return None
    return (cpu1 - cpu0) / n_nodes / args.hours


def simulate_peer(
    server: Any, tag: str, n_nodes: int, specs: tuple[dict[str, Any], dict[str, Any]], args: Any
) -> dict[str, Any]:
    """:func:`simulate`'s hour for a polling peer (no concurrent writers: a conflict is the
    peer's error here)."""
    rng = random.Random(args.seed)
    client = server.client()
    count = Counted(client)
    nodes = [f"{tag}-{i:05d}" for i in range(n_nodes)]
    peers = {n: PollingPeer(client, f"nfd-gpu-{n}") for n in nodes}  # counted by node
    offset = {n: rng.uniform(0, args.interval) for n in nodes}
    changed = set(rng.sample(nodes, int(n_nodes * args.changed)))
    base, grown = specs
    wall0 = time.perf_counter()
    for n in sorted(nodes, key=offset.__getitem__):
        peers[n].publish(base)
    startup = (sum(count.requests.values()), sum(count.sent.values()), dict(count.verbs))
    count.reset()
    cpu0 = server.cpu()
    ticks = int(args.hours * 3600 / args.interval)
    at_change: dict[str, tuple[int, int]] = {}
    for k in range(1, ticks + 1):
        for n in sorted(nodes, key=offset.__getitem__):
            before = (count.requests[n], count.sent[n] + count.received[n])
            t = k * args.interval + offset[n]
            spec = grown if (n in changed and t >= 30 * 60.0) else base
            peers[n].publish(spec)
            if spec is grown and n not in at_change:
                now = (count.requests[n], count.sent[n] + count.received[n])
                at_change[n] = (now[0] - before[0], now[1] - before[1])
    wall = time.perf_counter() - wall0
    cpu = _cpu_per_node_hour(server, cpu0, n_nodes, args)
    gens = [server.generation(f"nfd-gpu-{n}") - 1 for n in changed]
    unchanged = [n for n in nodes if n not in changed]

    return _result(
        args, n_nodes, startup, count, unchanged, list(at_change.values()),
        (len(changed), 0), gens, 0, server.rejected(), wall, cpu,
    )  # fmt: skip


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def held_watches(server: Real, n: int, n_nodes: int) -> list[str]:
    """The real server's memory before and after ``n`` held watches (module docstring)."""
    import socket

    cluster = server.cluster
    api = next(p for p in cluster.procs if "kube-apiserver" in str(p.args[0]))
    host, port = cluster.url.removeprefix("https://").split(":")
    ctx = cluster._ssl(None)
    path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures"
    # the objects exist (simulate() made them); each watch names one
    names = [f"nfd-gpu-node-{i % n_nodes:05d}" for i in range(n)]

    def settle() -> int:
        time.sleep(5)
        return _rss_kib(api.pid)

    before = settle()
    socks: list[Any] = []
    half: tuple[int, int] | None = None
    t0 = time.perf_counter()
    for k, name in enumerate(names):
        if k == n // 2:
            half = (k, settle())
        s = ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
        q = f"?watch=true&fieldSelector=metadata.name%3D{name}&timeoutSeconds=3600"
        head = f"GET {path}{q} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n"
        s.sendall(head.encode())
        socks.append(s)
    for s in socks:  # each answered (headers, the ADDED event of its object)
        s.settimeout(30)
        s.recv(65536)
    opened = time.perf_counter() - t0
    after = settle()
    for s in socks:
        s.close()
    per = (after - before) / n
    mid = f", {half[1] / 1024:.1f} MiB with {half[0]}" if half else ""
    return [
        f"held watches on the real kube-apiserver: {n} (one TLS connection each, "
        f"opened in {opened:.1f} s)",
        f"kube-apiserver VmRSS: {before / 1024:.1f} MiB before{mid}, {after / 1024:.1f} MiB "
        f"with {n}: {per:.1f} KiB per held watch",
    ]


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
        (
            "server CPU ms per node-hour (kube-apiserver + etcd)",
            lambda r: "-" if r["cpu"] is None else f"{r['cpu'] * 1000:.1f}",
        ),
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
    ap.add_argument("--peers", type=int, default=0, help="nodes of each peer's loop (fake)")
    ap.add_argument("--watches", type=int, default=0, help="held watches (real server)")
    args = ap.parse_args()
    results = []
    notes: list[str] = []
    with servers(args) as running:
        for server, n in running:
            results.append((server.name, simulate(server, n, args)))
            if isinstance(server, Real) and args.watches:
                notes += held_watches(server, args.watches, n)
        if args.peers:
            for server, n in running:
                for i, (name, specs) in enumerate(peer_specs().items()):
                    k = min(n, args.peers)
                    run = simulate_peer(server, f"peer{i}", k, specs, args)
                    results.append((f"{name} ({server.name})", run))
    print("\n".join(table(results, args)))
    if notes:
        print("\n" + "\n".join(notes))
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    results = [(n, r) for n, r in results if "loop" not in n]  # the peers are no test
    ok = all(
        r["req"] <= 2 and all(g == 1 for g in r["gens"]) and not r["errors"] and not r["rejected"]
        for _, r in results
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
