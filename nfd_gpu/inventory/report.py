"""The inventory's join: each agent's ``gpu.device`` instances, its Node, the DRA slices.

It joins them with the DRA drivers' ResourceSlices, and reports what disagrees.

The findings, by ``Finding.kind``:

- ``stale``: the object outlived its agent. Its Node is gone, or its owner Pod is:
  absent, or terminated. Its GPUs are listed apart and left out of the totals.
- ``not-allocatable``: the node's allocatable counts fewer GPUs than its bus has in
  ``container`` mode and not ``failed``. A device plugin leaves unhealthy ones out.
  Only for a vendor whose DRA driver publishes no slice on the node.
  Resources counted: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``amd.com/gpu``,
  ``gpu.intel.com/i915``, ``gpu.intel.com/xe``.
  A MIG-enabled GPU counts as allocatable when any ``nvidia.com/mig-*`` resource is.
- ``failed-schedulable``: a ``failed`` GPU on a node neither cordoned nor tainted
  ``NoSchedule`` or ``NoExecute``.
- ``missing-from-slice``: the vendor's DRA driver has slices for the node but no device
  for the GPU. A device matches by the GPU's UUID, as UUID or parent UUID, or by PCI address.
  Failed GPUs are not expected there: NVIDIA's driver drops unhealthy devices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.discovery.pciaddr import canonical
from nfd_gpu.inventory.collect import ClusterState
from nfd_gpu.sinks.kubeclient import NODE_NAME_LABEL

Obj = dict[str, Any]

# vendor -> (its DRA driver, its device plugins' whole-GPU resources)
VENDOR_DRIVERS = {
    "nvidia": ("gpu.nvidia.com", ("nvidia.com/gpu", "nvidia.com/gpu.shared")),
    "amd": ("gpu.amd.com", ("amd.com/gpu",)),
    "intel": ("gpu.intel.com", ("gpu.intel.com/i915", "gpu.intel.com/xe")),
}
MIG_RESOURCE = "nvidia.com/mig-"
# slice attributes naming a device's GPU: UUIDs and PCI addresses, per driver
UUID_ATTRIBUTES = ("uuid", "parentUUID")
ADDRESS_ATTRIBUTES = ("resource.kubernetes.io/pciBusID", "pciAddr", "parentPciAddr", "pciAddress")
KINDS = ("stale", "not-allocatable", "failed-schedulable", "missing-from-slice")


@dataclass(frozen=True)
class Gpu:
    """One ``gpu.device`` instance of an agent's NodeFeature."""

    node: str
    vendor: str
    product: str
    health: str
    address: str
    uuid: str
    mode: str
    mig_enabled: bool


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    node: str
    detail: str


@dataclass
class Inventory:
    """The GPUs of live objects, those of stale ones, the findings and notes."""

    gpus: list[Gpu]
    stale_gpus: list[Gpu]
    nodes: list[str]  # the nodes with a live object
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str, str, int]]:
        """Return product, node, health and GPUs rows, sorted."""
        c = Counter((g.product, g.node, g.health) for g in self.gpus)
        return [(p, n, h, k) for (p, n, h), k in sorted(c.items())]

    def totals(self) -> list[tuple[str, str, int]]:
        """Return product, health and GPUs rows, sorted."""
        c = Counter((g.product, g.health) for g in self.gpus)
        return [(p, h, k) for (p, h), k in sorted(c.items())]

    def health_totals(self) -> dict[str, int]:
        return dict(sorted(Counter(g.health for g in self.gpus).items()))


def gpus_of(obj: Obj) -> list[Gpu]:
    """Return the object's ``gpu.device`` instances."""
    node = node_of(obj)
    feats = ((obj.get("spec") or {}).get("features") or {}).get("instances") or {}
    out = []
    for el in (feats.get("gpu.device") or {}).get("elements") or []:
        a = (el or {}).get("attributes") or {}
        out.append(
            Gpu(
                node=node,
                vendor=str(a.get("vendor", "unknown")),
                product=str(a.get("product", "unknown")),
                health=str(a.get("health", "unknown")),
                address=str(a.get("address", "")),
                uuid=str(a.get("uuid", "")),
                mode=str(a.get("mode", "container")),
                mig_enabled=a.get("mig_enabled") == "true",
            )
        )
    return out


def node_of(obj: Obj) -> str:
    return str(obj["metadata"]["labels"][NODE_NAME_LABEL])


def _stale_reason(obj: Obj, nodes: dict[str, Obj] | None, pods: dict[str, Obj] | None) -> str:
    """Return why the object's agent is gone; "" while it is not known to be."""
    node = node_of(obj)
    if nodes is not None and node not in nodes:
        return f"node {node} does not exist"
    meta = obj["metadata"]
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") != "Pod" or pods is None:
            continue
        pod = pods.get(str(ref.get("uid")))
        where = f"{meta.get('namespace')}/{ref.get('name')}"
        if pod is None:
            return f"its agent Pod {where} is gone"
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Failed", "Succeeded"):
            return f"its agent Pod {where} has ended ({phase})"
    return ""


def _allocatable(node: Obj) -> dict[str, int]:
    out = {}
    for k, v in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            out[str(k)] = int(str(v))
        except ValueError:
            continue
    return out


def _slice_ids(slices: Iterable[Obj]) -> dict[tuple[str, str], set[str]]:
    """Map node and driver to the UUIDs and canonical PCI addresses its slices' devices name."""
    ids: dict[tuple[str, str], set[str]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node, driver = spec.get("nodeName"), str(spec.get("driver", ""))
        if not node:
            continue
        got = ids.setdefault((str(node), driver), set())
        for dev in spec.get("devices") or []:
            attrs = (dev.get("basic") or dev).get("attributes") or {}  # v1beta1 has `basic`
            for name, value in attrs.items():
                short = name.removeprefix(f"{driver}/")
                text = next(iter((value or {}).values()), None)
                if short in UUID_ATTRIBUTES and text:
                    got.add(str(text))
                elif short in ADDRESS_ATTRIBUTES and (addr := canonical(str(text))):
                    got.add(addr)
    return ids


def _not_allocatable(
    node: str, gpus: list[Gpu], alloc: dict[str, int], dra: set[str]
) -> list[Finding]:
    out = []
    for vendor, (driver, resources) in VENDOR_DRIVERS.items():
        mine = [
            g for g in gpus if g.vendor == vendor and g.mode == "container" and g.health != "failed"
        ]
        if not mine or driver in dra:
            continue
        covered = sum(alloc.get(r, 0) for r in resources)
        if any(
            k.startswith(MIG_RESOURCE) and v > 0 for k, v in alloc.items() if vendor == "nvidia"
        ):
            covered += sum(g.mig_enabled for g in mine)
        if covered < len(mine):
            names = ", ".join(f"{r}={alloc[r]}" for r in resources if r in alloc)
            out.append(
                Finding(
                    "not-allocatable",
                    node,
                    f"{len(mine)} {vendor} GPUs on the bus not failed, allocatable "
                    f"{names or 'none'}",
                )
            )
    return out


def _failed_schedulable(node: str, gpus: list[Gpu], obj: Obj) -> list[Finding]:
    failed = [g.address for g in gpus if g.health == "failed"]
    if not failed:
        return []
    spec = obj.get("spec") or {}
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])
    if tainted or spec.get("unschedulable"):
        return []
    return [
        Finding(
            "failed-schedulable",
            node,
            f"failed GPU {', '.join(failed)}; the node is not tainted NoSchedule/NoExecute "
            "nor cordoned (rules/gpu-health.yaml)",
        )
    ]


def _missing(node: str, gpus: list[Gpu], ids: dict[tuple[str, str], set[str]]) -> list[Finding]:
    out = []
    for g in gpus:
        driver = VENDOR_DRIVERS.get(g.vendor, ("", ()))[0]
        named = ids.get((node, driver))
        if named is None or g.health == "failed" or g.mode != "container":
            continue
        if (g.uuid and g.uuid in named) or canonical(g.address) in named:
            continue
        who = f"{g.address} {g.uuid}".strip()
        out.append(Finding("missing-from-slice", node, f"{driver} publishes no device for {who}"))
    return out


def build(state: ClusterState) -> Inventory:
    """Join what was read into an :class:`Inventory`."""
    nodes = None if state.nodes is None else {n["metadata"]["name"]: n for n in state.nodes}
    pods = None if state.pods is None else {p["metadata"].get("uid"): p for p in state.pods}
    ids = _slice_ids(state.slices or [])
    inv = Inventory([], [], [], notes=list(state.notes))
    for obj in sorted(state.nodefeatures, key=node_of):
        node, gpus = node_of(obj), gpus_of(obj)
        reason = _stale_reason(obj, nodes, pods)
        if reason:
            inv.stale_gpus += gpus
            name = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            inv.findings.append(Finding("stale", node, f"{name}: {reason} ({len(gpus)} GPUs)"))
            continue
        inv.gpus += gpus
        inv.nodes.append(node)
        inv.findings += _missing(node, gpus, ids)
        if nodes is None:
            continue
        dra = {d for (n, d) in ids if n == node}
        inv.findings += _not_allocatable(node, gpus, _allocatable(nodes[node]), dra)
        inv.findings += _failed_schedulable(node, gpus, nodes[node])
    inv.findings.sort(key=lambda f: (KINDS.index(f.kind), f.node, f.detail))
    return inv
