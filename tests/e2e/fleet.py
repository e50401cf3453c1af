"""A simulated GPU fleet on a real kube-apiserver, for ``nfd-gpu inventory``'s tests and
benchmark: per node a Node (allocatable as a device plugin reports it, taints), the agent's
Pod and its NodeFeature as the real sink builds it from a scan of a fixture; a few nodes
with a DRA driver's ResourceSlice; and what the inventory must answer, derived from the
scans' snapshots (not from the objects the inventory reads back).

The roles, by node index ``i`` (``Fleet.build``):

- fixture ``FIXTURES[i % len(FIXTURES)]``; a node with a failed GPU is tainted (as
  ``rules/gpu-health.yaml`` does) on every other round of the fixtures, so half are not;
- ``i == 0`` (hgx-h100): the device plugin reports 2 GPUs fewer (``not-allocatable``);
- ``i == len(FIXTURES)`` (hgx-h100): NVIDIA's DRA driver publishes a slice lacking the
  first GPU, and there is no ``nvidia.com/gpu`` (``missing-from-slice``);
- ``i == 1`` (mi210-8x): AMD's DRA driver publishes all its GPUs (no finding);
- the last node: its agent Pod is gone (``stale``).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.dra.preview import devices
from nfd_gpu.model import Gpu, Snapshot
from nfd_gpu.scan import ScanResult, run_scan
from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.conftest import fixture_root

Obj = dict[str, Any]
FIXTURES = (
    "hgx-h100", "mi210-8x", "arc-a770", "a100-t4", "mixed-nvidia-amd", "h100-gpu-lost",
    "max1550-xe", "mi210-ras-ue", "h100-ecc-uncorrectable", "dgx-a100-mig-mixed",
    "real-rtx5090-rtx4090", "passthrough-host", "mi300x-cpx-nps4", "real-mi350x",
)  # fmt: skip
RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "gpu.intel.com/i915"}
SERVICE_ACCOUNT = "fleet-agent"  # the Pods' (the ServiceAccount admission wants it to exist)
TAINT = {
    "key": "gpu.feature.node.kubernetes.io/unhealthy",
    "value": "failed",
    "effect": "NoSchedule",
}


@functools.cache
def scanned(fixture: str) -> ScanResult:
    return run_scan(fixture_root(fixture))


def _allocatable(gpus: tuple[Gpu, ...]) -> dict[str, str]:
    """What a healthy device plugin reports: the container-mode GPUs not failed, MIG-enabled
    NVIDIA GPUs as ``nvidia.com/mig-1g.5gb`` (7 each)."""
    c: Counter[str] = Counter()
    for g in gpus:
        if g.mode != "container" or g.health.state == "failed":
            continue
        if g.nvidia.mig_enabled:
            c["nvidia.com/mig-1g.5gb"] += 7
        else:
            c[RESOURCE[g.vendor]] += 1
    return {"cpu": "64", "memory": "512Gi", "pods": "110", **{k: str(v) for k, v in c.items()}}


def slice_object(node: str, driver: str, snap: Snapshot, skip: int = 0) -> Obj:
    """A ``resource.k8s.io/v1`` ResourceSlice of ``driver``'s preview devices for ``snap``
    (``nfd_gpu/dra/preview.py``, so the real server validates their shape too), without
    the first ``skip`` GPUs' devices."""
    left_out = [g.address for g in snap.gpus if g.vendor == driver.split(".")[1]][:skip]
    devs = [
        d.api()
        for d in devices(snap)
        if d.driver == driver and d.gpu is not None and d.gpu.address not in left_out
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }


@dataclass
class Fleet:
    """The objects to create and what the inventory must report about them."""

    namespace: str
    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    nodefeatures: list[Obj] = field(default_factory=list)
    slices: list[Obj] = field(default_factory=list)
    totals: Counter[tuple[str, str]] = field(default_factory=Counter)  # (product, health)
    findings: set[tuple[str, str]] = field(default_factory=set)  # (kind, node)
    stale_gpus: int = 0

    @classmethod
    def build(cls, n: int, namespace: str, prefix: str) -> Fleet:
        fleet = cls(namespace)
        for i in range(n):
            fleet._member(i, n, f"{prefix}{i:04d}")
        return fleet

    def _member(self, i: int, n: int, node: str) -> None:
        fixture = FIXTURES[i % len(FIXTURES)]
        res = scanned(fixture)
        gpus = res.snapshot.gpus
        alloc = _allocatable(gpus)
        failed = any(g.health.state == "failed" for g in gpus)
        tainted = failed and (i // len(FIXTURES)) % 2 == 0
        if i == 0:
            alloc["nvidia.com/gpu"] = str(int(alloc["nvidia.com/gpu"]) - 2)
            self.findings.add(("not-allocatable", node))
        if i == len(FIXTURES):
            del alloc["nvidia.com/gpu"]
            self.slices.append(slice_object(node, "gpu.nvidia.com", res.snapshot, skip=1))
            self.findings.add(("missing-from-slice", node))
        if i == 1:
            del alloc["amd.com/gpu"]
            self.slices.append(slice_object(node, "gpu.amd.com", res.snapshot))
        self.nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                "spec": {"taints": [TAINT]} if tainted else {},
                "status": {
                    "capacity": alloc,
                    "allocatable": alloc,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                },
            }
        )
        pod_uid = str(uuid.uuid4())
        pod_name = f"nfd-gpu-agent-{node}"
        stale = i == n - 1
        if stale:
            self.findings.add(("stale", node))
            self.stale_gpus += len(gpus)
        else:
            self.pods.append(self._pod(pod_name, node))
            self.totals.update((g.product, g.health.state) for g in gpus)
            if failed and not tainted:
                self.findings.add(("failed-schedulable", node))
        obj = NodeFeatureSink(node_name=node, namespace=self.namespace, owner_refs=()).desired(
            Publication(res.labels, res.features)
        )
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}
        ]
        self.nodefeatures.append(obj)

    def _pod(self, name: str, node: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "nodeName": node,
                "serviceAccountName": SERVICE_ACCOUNT,
                "automountServiceAccountToken": False,
                "containers": [{"name": "agent", "image": "nfd-gpu:test"}],
            },
        }

    def create(self, request: Any, workers: int = 4) -> None:
        """Create everything with ``request(method, path, body)`` (``Cluster.request``),
        ``workers`` requests at a time; the NodeFeatures' Pod owner references get the
        created Pods' uids."""
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT}}
        request("POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts", sa)
        with ThreadPoolExecutor(workers) as pool:

            def node(obj: Obj) -> None:
                # the server's TaintNodesByCondition admission adds node.kubernetes.io/
                # not-ready at creation; a Ready node has it removed by the node lifecycle
                # controller: here the PUT of the node as it should be
                request("POST", "/api/v1/nodes", obj)
                name = obj["metadata"]["name"]
                request("PUT", f"/api/v1/nodes/{name}", _with_rv(request, obj))
                request("PUT", f"/api/v1/nodes/{name}/status", _with_rv(request, obj))

            list(pool.map(node, self.nodes))
            path = f"/api/v1/namespaces/{self.namespace}/pods"
            made = pool.map(lambda pod: request("POST", path, pod), self.pods)
            uids = {m["metadata"]["name"]: m["metadata"]["uid"] for m in made}
            base = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{self.namespace}/nodefeatures"
            for obj in self.nodefeatures:
                ref = obj["metadata"]["ownerReferences"][0]
                ref["uid"] = uids.get(ref["name"], ref["uid"])
            list(pool.map(lambda obj: request("POST", base, obj), self.nodefeatures))
        for s in self.slices:
            request("POST", "/apis/resource.k8s.io/v1/resourceslices", s)

    def delete(self, request: Any) -> None:
        for node in self.nodes:
            request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
        for s in self.slices:
            request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{s['metadata']['name']}")


def _with_rv(request: Any, node: Obj) -> Obj:
    """``node`` with the server's resourceVersion (a status PUT needs it)."""
    current = request("GET", f"/api/v1/nodes/{node['metadata']['name']}")
    body = json.loads(json.dumps(node))
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return body
