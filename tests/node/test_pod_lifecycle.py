"""What only a real pod shows: its start, its end, a host without module support.

On the nodefeature-api overlay as shipped (the h200-mig-mixed fixture's host paths):

- the pod's container ends within 2 s of its deletion, Ready or still starting (the agent is PID 1:
  a SIGTERM it ignores costs the whole 30 s grace period, stalling rollouts and drains);
- its first readiness probe passes (no ``Unhealthy`` event): the CPU limit and the probe
  delay fit the measured start;
- on a host without ``/proc/modules`` (a kernel without module support) the pod starts.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tests.e2e.cluster import Cluster, Obj
from tests.e2e.conftest import wait_for
from tests.node.node import Node
from tests.node.scenario import FIXTURES, Install, direct_scan, label_node

FIXTURE = "h200-mig-mixed"


def _installed(cluster: Cluster, node: Node, work: Path, fixture: str = FIXTURE) -> Install:
    label_node(cluster, node, fixture, work / "nfd-worker")
    inst = Install(cluster, node, "kustomize", fixture, work / "install")
    inst.install()
    return inst


def _running(inst: Install) -> Obj | None:
    for p in inst.pods():
        for c in p.get("status", {}).get("containerStatuses") or []:
            if "running" in c.get("state", {}):
                return p
    return None


def _delete_and_time(cluster: Cluster, node: Node, inst: Install, pod: Obj) -> float:
    """Seconds from the pod's deletion to its container's end (containerd's task stopped)."""
    name = pod["metadata"]["name"]
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    path = f"/api/v1/namespaces/{inst.namespace}/pods/{name}"

    def stopped() -> bool:
        for line in node.ctr("tasks", "ls").splitlines()[1:]:
            f = line.split()
            if f and f[0] == cid:
                return f[-1] != "RUNNING"
        return True  # no task any more

    t0 = time.monotonic()
    cluster.request("DELETE", path)
    wait_for(stopped, 60, lambda: f"container of {name} still running")
    took = time.monotonic() - t0

    def gone() -> bool:
        names = {
            p["metadata"]["name"] for p in cluster.request("GET", path.rsplit("/", 1)[0])["items"]
        }
        return name not in names

    wait_for(gone, 60, lambda: f"pod {name} still there")
    return took


def test_pod_ends_within_2s_of_deletion_ready_or_starting(
    control_plane: Cluster, node: Node, tmp_path: Path
) -> None:
    inst = _installed(control_plane, node, tmp_path)
    try:
        starting = wait_for(lambda: _running(inst), 120, lambda: "no container running")
        took_starting = _delete_and_time(control_plane, node, inst, starting)
        ready = inst.ready_pod()  # the DaemonSet's replacement
        took_ready = _delete_and_time(control_plane, node, inst, ready)
        print(
            f"\ncontainer ended {took_starting:.1f} s after deletion while starting, "
            f"{took_ready:.1f} s when Ready"
        )
        assert took_starting < 2.0, f"a starting pod took {took_starting:.1f} s to end"
        assert took_ready < 2.0, f"a Ready pod took {took_ready:.1f} s to end"
    finally:
        inst.uninstall(set(direct_scan(FIXTURE)))


def test_first_readiness_probe_passes(control_plane: Cluster, node: Node, tmp_path: Path) -> None:
    inst = _installed(control_plane, node, tmp_path)
    try:
        pod = inst.ready_pod()
        name = pod["metadata"]["name"]
        started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        events = control_plane.request("GET", f"/api/v1/namespaces/{inst.namespace}/events")[
            "items"
        ]
        bad = [
            f"{e['reason']}: {e.get('message', '')}"
            for e in events
            if e["involvedObject"].get("name") == name and e["reason"] == "Unhealthy"
        ]
        print(
            f"\npod Ready {inst.ready_s:.1f} s after install (container started {started}); "
            f"probe failures: {bad}"
        )
        assert bad == []
    finally:
        inst.uninstall(set(direct_scan(FIXTURE)))


def test_pod_starts_on_a_host_without_proc_modules(
    control_plane: Cluster, node: Node, tmp_path: Path
) -> None:
    root = tmp_path / "h200-no-modules"  # an absolute path: FIXTURES / root is root
    shutil.copytree(FIXTURES / FIXTURE, root, symlinks=True)
    (root / "proc" / "modules").unlink()
    inst = _installed(control_plane, node, tmp_path, str(root))
    try:
        inst.ready_pod(90)
        wait_for(inst.nodefeature, 60, lambda: "no NodeFeature published")
    finally:
        inst.uninstall(set(direct_scan(str(root))))
