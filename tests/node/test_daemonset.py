"""The shipped DaemonSet on a real node: scheduled, Ready, and the labels of a direct scan.

For the nodefeature-api overlay (kustomize) and the Helm chart (defaults), on an NVIDIA MIG
node, an AMD partitioned node, an Intel node and a GPU-less node (fixtures under
tests/fixtures/sysfs, their host paths swapped in, nothing else): nfd-worker labels the
node, the DaemonSet controller schedules the agent's pod by those labels (none on the
GPU-less node), the kubelet runs it until Ready, it publishes its NodeFeature, and
nfd-master puts on the Node exactly the labels ``nfd-gpu scan`` of the same tree gives,
less only the documented pod losses (tests/deploy/losses.py) that apply to the pod.
"""

from __future__ import annotations

import fnmatch
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.deploy import kustomize, podview
from tests.deploy.losses import UNAVAILABLE
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import wait_for
from tests.node.node import Node
from tests.node.scenario import FIXTURES, Install, direct_scan, label_node, node_labels

SCENARIOS = {
    "h200-mig-mixed": "NVIDIA MIG",
    "mi300x-cpx-nps4": "AMD partitioned (CPX, NPS4)",
    "max1550-xe": "Intel",
    "vm-no-gpu": "no GPU",
}


def loss_globs() -> tuple[str, ...]:
    """The label globs the shipped pod may lose (its mounts decide which entries apply)."""
    pod = podview.pod_spec(kustomize.build(REPO / "deploy" / "overlays" / "nodefeature-api"))
    return tuple(g for u in UNAVAILABLE.values() if u.applies(pod) for g in u.labels)


def _lost(key: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(key, g) for g in globs)


@pytest.mark.parametrize("how", ["kustomize", "helm"])
@pytest.mark.parametrize("fixture", list(SCENARIOS))
def test_daemonset_labels_the_node_as_a_direct_scan(
    control_plane: Cluster, node: Node, tmp_path: Path, fixture: str, how: str
) -> None:
    assert (FIXTURES / fixture).is_dir()
    pci = label_node(control_plane, node, fixture, tmp_path / "nfd-worker")
    direct = direct_scan(fixture)
    globs = loss_globs()
    inst = Install(control_plane, node, how, fixture, tmp_path / "install")
    inst.install()
    print(f"\n[{how} / {fixture}: {SCENARIOS[fixture]}] nfd-worker pci labels: {sorted(pci)}")
    try:
        if not direct:  # the affinity keeps the agent off a GPU-less node
            ds_path = f"/apis/apps/v1/namespaces/{inst.namespace}/daemonsets/nfd-gpu"

            def observed() -> bool:
                ds = control_plane.request("GET", ds_path)
                return bool(
                    ds.get("status", {}).get("observedGeneration") == ds["metadata"]["generation"]
                )

            wait_for(observed, 30)
            time.sleep(3)
            ds = control_plane.request("GET", ds_path)
            assert ds["status"]["desiredNumberScheduled"] == 0
            assert not inst.pods()
            print("  no pod scheduled (desiredNumberScheduled 0); direct scan: no labels")
            return
        inst.ready_pod()
        nf = wait_for(inst.nodefeature, 60, lambda: "no NodeFeature published")
        published = nf["spec"].get("labels", {})
        keys = set(published) | set(direct)
        wait_for(
            lambda: (
                {k: v for k, v in node_labels(control_plane, node).items() if k in keys}
                == published
            ),
            60,
            lambda: f"Node labels {node_labels(control_plane, node)} != published {published}",
        )
        on_node = {k: v for k, v in node_labels(control_plane, node).items() if k in keys}
        differ = sorted(k for k in keys if published.get(k) != direct.get(k))
        print(
            f"  pod Ready {inst.ready_s:.1f} s after install; labels published {len(published)}, "
            f"direct scan {len(direct)}, on the Node {len(on_node)}"
        )
        for k in differ:
            print(f"  pod loss: {k}: direct {direct.get(k)!r} -> published {published.get(k)!r}")
        print("  Node labels: " + ", ".join(f"{k}={v}" for k, v in sorted(on_node.items())))
        assert [k for k in differ if not _lost(k, globs)] == []
        assert on_node == published
    finally:
        inst.uninstall(set(direct))
