"""NFD's own nfd-worker judges nfd-gpu's ``pci.device`` instances: its pci source, one
pass over each fixture's sysfs (``host-sys`` -> ROOT/sys), publishes a NodeFeature whose
``pci.device`` elements must be nfd-gpu's (the instances its rules see, featuremap.py), on
every fixture and on an ``nfd-gpu snapshot`` of it (a capture keeps what nfd-worker reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.capture import PEER_PCI_FILES, capture_host
from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, fixture_root
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import NFD_NAMESPACE
from tests.e2e.test_cluster import run_nfd_worker


def _key(e: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(e["attributes"].items()))


def ours(root: Path) -> list[tuple[tuple[str, str], ...]]:
    feats = snapshot_features(run_scan(str(root)).snapshot)
    return sorted(_key(e) for e in feats["instances"].get("pci.device", {}).get("elements", []))


def nfd_workers(cluster: Cluster, root: Path, node: str, work: Path) -> list[Any]:
    work.mkdir()
    (work / "host-sys").symlink_to(root / "sys")
    worker = run_nfd_worker(cluster, node, work, "pci")
    assert worker.returncode == 0, worker.stderr[-3000:]
    path = f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NFD_NAMESPACE}/nodefeatures/{node}"
    nf = cluster.request("GET", path)
    elements = nf["spec"]["features"]["instances"].get("pci.device", {}).get("elements", [])
    return sorted(_key(e) for e in elements)


# Captured on a real node by an nfd-gpu snapshot that did not yet save the files nfd-worker
# reads (class, vendor, device, subsystem_*; snapshot.PEER_PCI_FILES): nfd-worker finds no
# PCI function in it. Judged once captured again with this snapshot.
OLD_CAPTURES = ("h200-vm",)
JUDGED = [n for n in ALL_FIXTURES if n not in OLD_CAPTURES]


@pytest.mark.parametrize("name", OLD_CAPTURES)
def test_old_capture_lacks_what_nfd_worker_reads(name: str) -> None:
    devices = sorted((fixture_root(name) / "sys/bus/pci/devices").iterdir())
    assert devices and not any((d / f).exists() for d in devices for f in PEER_PCI_FILES[:5])


@pytest.mark.parametrize("name", JUDGED)
def test_nfd_worker_pci_device_equals_ours(
    kube_cluster: Cluster, tmp_path: Path, name: str
) -> None:
    root = fixture_root(name)
    theirs = nfd_workers(kube_cluster, root, f"pci-{name}", tmp_path / "fixture")
    assert theirs == ours(root)
    # the capture of that node: nfd-worker finds the same PCI functions in it
    capture = tmp_path / "capture"
    capture_host(capture, root)
    assert nfd_workers(kube_cluster, capture, f"pci-cap-{name}", tmp_path / "cap") == theirs
