"""GPU health on the real node: a GPU failing during the run taints the node, a restart of
the pod keeps the taint, a driver reload takes it back.

The nodefeature-api overlay (kustomize) on a copy of the h100-xid-48 fixture, the shipped
rules/gpu-health.yaml applied, nfd-master with ``-enable-taints`` (conftest). Two changes
to the shipped DaemonSet, both for this test: ``--interval=1`` (so a pass is a second), and
the fixture's NVML recording mounted at ``/host/nvml.json`` (a ``hostPath`` file), because
the real node has no GPU and no NVIDIA driver: NVML in the pod is the recording replayed by
the agent (``discovery/nvidia/replay.py``, the fake hardware of tests/e2e's health tests),
rewritten in place on the host as the driver's state changes. Everything else is real: the
kubelet's pod and restarts, the API server, the admission policy checking every write of
the NodeFeature (its held-health annotation included), nfd-master's taint.

One scenario, in order:

1. the pod starts before the driver (``nvmlInit``: ``Driver Not Loaded``): the node is
   labelled, no health is known, no taint;
2. the driver is up and both GPUs report XID 48 (NVML's event set): the node is tainted
   within a pass or two (worse shows at once, no hold);
3. the pod is deleted (a rollout, an OOM kill) and the DaemonSet starts a new one, whose
   event set sees no old event: the taint stays (the XIDs are read back from the
   NodeFeature's annotation). On main the new pod said ``ok`` and the taint went;
4. the driver reloads (each GPU bound again: its sysfs ``driver`` link made anew): the GPUs
   were re-initialised and the taint goes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.e2e.cluster import ApiError, Cluster, Obj, load_yaml_docs
from tests.e2e.conftest import wait_for
from tests.node.node import Node
from tests.node.scenario import FIXTURES, Install, label_node, node_labels

FIXTURE = "h100-xid-48"
GPUS = ("0000:18:00.0", "0000:2a:00.0")
G = "gpu.feature.node.kubernetes.io"
TAINT = {"key": f"{G}/unhealthy", "value": "failed", "effect": "NoSchedule"}
RULES = "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/"


def _taints(cluster: Cluster, node: Node) -> list[dict[str, str]]:
    spec = cluster.request("GET", f"/api/v1/nodes/{node.name}").get("spec", {})
    return [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in spec.get("taints", [])]


def _recording_and_interval(root: Path) -> Any:
    def patch(objs: list[Obj]) -> None:
        ds = next(o for o in objs if o["kind"] == "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        pod["volumes"].append(
            {
                "name": "nvml-recording",
                "hostPath": {"path": str(root / "nvml.json"), "type": "File"},
            }
        )
        (c,) = pod["containers"]
        c["volumeMounts"].append(
            {"name": "nvml-recording", "mountPath": "/host/nvml.json", "readOnly": True}
        )
        c["args"] = ["--interval=1" if a.startswith("--interval=") else a for a in c["args"]]

    return patch


def _write(path: Path, doc: dict[str, Any]) -> None:
    """In place (one write, same inode): the pod's file mount shows the new content."""
    with path.open("r+b") as f:
        f.truncate(0)
        f.write(json.dumps(doc).encode())


def _pod_log(node: Node, inst: Install) -> str:
    logs = sorted((node.workdir / "pod-logs").glob(f"{inst.namespace}_*/nfd-gpu/*.log"))
    return "\n".join(f.read_text(errors="replace") for f in logs)


def test_failing_gpu_taints_the_node_and_a_restart_keeps_it(
    control_plane: Cluster, node: Node, tmp_path: Path
) -> None:
    root = tmp_path / "h100-xid-48"  # absolute: FIXTURES / root is root
    shutil.copytree(FIXTURES / FIXTURE, root, symlinks=True)
    rec = json.loads((root / "nvml.json").read_text())
    fired = dict(rec, events=[{"device": i, "type": 8, "data": 48} for i in (0, 1)])
    _write(root / "nvml.json", dict(rec, nvmlInit={"error": "DriverNotLoaded"}))
    (rule,) = list(load_yaml_docs(REPO / "rules" / "gpu-health.yaml"))
    control_plane.apply(rule)
    label_node(control_plane, node, str(root), tmp_path / "nfd-worker")
    inst = Install(control_plane, node, "kustomize", str(root), tmp_path / "install")
    inst.patch = _recording_and_interval(root)
    inst.install()

    def why() -> str:
        return f"taints: {_taints(control_plane, node)}\npod log:\n{_pod_log(node, inst)[-4000:]}"

    try:
        first = inst.ready_pod(120)
        wait_for(lambda: node_labels(control_plane, node).get(f"{G}/count") == "2", 60, why)
        assert f"{G}/health" not in node_labels(control_plane, node), why()
        assert TAINT not in _taints(control_plane, node)

        t0 = time.monotonic()
        _write(root / "nvml.json", fired)  # the driver is up; XID 48 on both GPUs
        wait_for(lambda: TAINT in _taints(control_plane, node), 60, why)
        tainted = time.monotonic() - t0
        assert node_labels(control_plane, node)[f"{G}/health.all-failed"] == "true"

        _write(root / "nvml.json", rec)  # a new pod's event set: the XIDs are past
        control_plane.request(
            "DELETE", f"/api/v1/namespaces/{inst.namespace}/pods/{first['metadata']['name']}"
        )
        t1 = time.monotonic()

        def restarted() -> bool:
            return _pod_log(node, inst).count("held before the agent restarted") == len(GPUS)

        wait_for(restarted, 120, why)
        back = time.monotonic() - t1
        time.sleep(3)  # three passes of the new pod
        assert TAINT in _taints(control_plane, node), why()  # on main: gone
        assert node_labels(control_plane, node)[f"{G}/health"] == "failed"

        t2 = time.monotonic()
        for bdf in GPUS:  # the driver reloaded: each GPU bound again
            link = root / "sys/bus/pci/devices" / bdf / "driver"
            new = link.with_name("driver.new")
            os.symlink(os.readlink(link), new)
            os.replace(new, link)
        wait_for(lambda: TAINT not in _taints(control_plane, node), 60, why)
        cleared = time.monotonic() - t2
        assert node_labels(control_plane, node)[f"{G}/health"] == "ok"
        print(
            f"\nXID 48 on both GPUs: tainted {tainted:.1f} s later (passes of 1 s); pod deleted: "
            f"the new pod held both GPUs failed {back:.1f} s later, taint kept; driver bound "
            f"again: taint gone {cleared:.1f} s later"
        )
    finally:
        nf = inst.nodefeature()
        inst.uninstall(set(nf["spec"].get("labels", {})) if nf else {f"{G}/count"})
        with contextlib.suppress(ApiError):
            control_plane.request("DELETE", RULES + rule["metadata"]["name"])
