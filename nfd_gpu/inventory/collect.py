"""The inventory's API reads: every list paginated, decoded as plain JSON.

- Lists are paginated with ``limit`` and ``continue``.
- No generated models: a thousand Nodes decode in milliseconds.

What it reads, and the RBAC each needs; see docs/operations.md "Inventory":

- NodeFeatures named ``nfd-gpu-<node>`` with the ``nfd.node.kubernetes.io/node-name`` label.
  Needs ``list nodefeatures``, in all namespaces or ``--namespace``. Required.
- Nodes, by ``list nodes``: allocatable, taints, cordons and which nodes exist.
- Pods in the NodeFeatures' namespaces, by ``list pods``: whether an object's agent Pod
  still runs. Without the right the check is skipped, with a note.
- ResourceSlices, by ``list resourceslices``, in the version the server prefers.
  Skipped with a note where the API is absent or not allowed.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.kubeclient import (
    GROUP,
    NODE_NAME_LABEL,
    OBJECT_PREFIX,
    PLURAL,
    VERSION,
    api_exception,
    build_api_client,
    get_raw,
)

Obj = dict[str, Any]
DRA_GROUP = "resource.k8s.io"


class InventoryError(Exception):
    """A read the inventory cannot do without, the NodeFeatures or the client; one line."""


class Denied(Exception):
    """A 403/404 on an optional read: the caller notes it and goes on."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(f"{status} on {what}")
        self.status = status


@dataclass
class ClusterState:
    """What the API answered: the objects as JSON, and what could not be read."""

    nodefeatures: list[Obj]
    nodes: list[Obj] | None = None  # None: not readable
    pods: list[Obj] | None = None
    slices: list[Obj] | None = None
    slice_version: str = ""
    notes: list[str] = field(default_factory=list)


class Reader:
    """Paginated GETs through one ``ApiClient``."""

    def __init__(self, api_client: Any, timeout: float, chunk: int = 500) -> None:
        self.api = api_client
        self.timeout = timeout
        self.chunk = chunk  # objects per list request

    def get(self, path: str, query: dict[str, str] | None = None) -> Obj:
        """Do one GET, decoded; ``Denied`` on 403/404, ``InventoryError`` on the rest."""
        from urllib3.exceptions import HTTPError  # lazy: comes with kubernetes

        ApiException = api_exception()

        try:
            body = json.loads(get_raw(self.api, path, {}, self.timeout, query))
        except ApiException as e:
            if e.status in (403, 404):
                raise Denied(int(e.status), path) from None
            if e.status == 401:
                raise InventoryError("unauthorized: the server rejected the credentials") from None
            raise InventoryError(f"GET {path}: {e.status} {e.reason}") from None
        except (HTTPError, OSError) as e:
            raise InventoryError(f"GET {path}: {type(e).__name__}: {e}") from None
        except ValueError:
            raise InventoryError(f"GET {path}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise InventoryError(f"GET {path}: the answer is not an object")
        return body

    def list(self, path: str, query: dict[str, str] | None = None) -> list[Obj]:
        """Return every item of a list, page by page."""
        items: list[Obj] = []
        cont = ""
        while True:
            q = {**(query or {}), "limit": str(self.chunk)}
            if cont:
                q["continue"] = cont
            body = self.get(path, q)
            items += [i for i in body.get("items") or [] if isinstance(i, dict)]
            cont = str((body.get("metadata") or {}).get("continue") or "")
            if not cont:
                return items


def is_agent_object(obj: Obj) -> bool:
    """Tell an nfd-gpu agent's NodeFeature: ``nfd-gpu-<node>``, labelled with its node."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name", "")).startswith(OBJECT_PREFIX) and bool(
        (meta.get("labels") or {}).get(NODE_NAME_LABEL)
    )


def _nodefeatures(reader: Reader, namespace: str | None) -> list[Obj]:
    where = f"/namespaces/{namespace}" if namespace else ""
    path = f"/apis/{GROUP}/{VERSION}{where}/{PLURAL}"
    try:
        objs = reader.list(path, {"labelSelector": NODE_NAME_LABEL})
    except Denied as d:
        scope = f"in namespace {namespace}" if namespace else "in all namespaces"
        if d.status == 404:
            raise InventoryError(f"the API server has no {PLURAL}.{GROUP} (NFD's CRDs)") from None
        raise InventoryError(
            f"forbidden: list {PLURAL}.{GROUP} {scope} (see docs/operations.md, Inventory)"
        ) from None
    return [o for o in objs if is_agent_object(o)]


def _optional(reader: Reader, path: str, what: str, notes: list[str]) -> list[Obj] | None:
    try:
        return reader.list(path)
    except Denied as d:
        why = "not allowed" if d.status == 403 else "not found"
        notes.append(f"{what}: {why} (list {path}): not checked")
        return None


def slice_version(reader: Reader, notes: list[str]) -> str:
    """Return the ``resource.k8s.io`` version the server prefers; "" when it serves none."""
    try:
        group = reader.get(f"/apis/{DRA_GROUP}")
    except Denied:
        notes.append(f"{DRA_GROUP} is not served: no ResourceSlices compared")
        return ""
    preferred = (group.get("preferredVersion") or {}).get("version")
    if not preferred:
        notes.append(f"{DRA_GROUP} has no version: no ResourceSlices compared")
        return ""
    return str(preferred)


def collect(
    kubeconfig: str | None, namespace: str | None, timeout: float, chunk: int = 500
) -> ClusterState:
    """Read the cluster; ``kubeconfig`` None means in-cluster, else ``~/.kube/config``."""
    try:
        reader = Reader(build_api_client(kubeconfig), timeout, chunk)
    except SinkError as e:
        raise InventoryError(str(e)) from None
    node_notes: list[str] = []
    slice_notes: list[str] = []
    # the cluster-scoped lists in flight while the NodeFeatures (then their Pods) are read
    with ThreadPoolExecutor(2) as pool:
        nodes = pool.submit(_optional, reader, "/api/v1/nodes", "Nodes", node_notes)
        slices = pool.submit(_slices, reader, slice_notes)
        state = ClusterState(_nodefeatures(reader, namespace))
        namespaces = sorted({str(o["metadata"].get("namespace", "")) for o in state.nodefeatures})
        pods: list[Obj] | None = []
        for ns in namespaces:
            got = _optional(reader, f"/api/v1/namespaces/{ns}/pods", "agent Pods", state.notes)
            pods = None if got is None or pods is None else pods + got
        state.pods = pods
        state.nodes = nodes.result()
        state.slice_version, state.slices = slices.result()
    state.notes = node_notes + state.notes + slice_notes
    return state


def _slices(reader: Reader, notes: list[str]) -> tuple[str, list[Obj] | None]:
    """Return the served version of ``resource.k8s.io`` and every ResourceSlice; None: not read."""
    version = slice_version(reader, notes)
    if not version:
        return "", None
    path = f"/apis/{DRA_GROUP}/{version}/resourceslices"
    return version, _optional(reader, path, "ResourceSlices", notes)
