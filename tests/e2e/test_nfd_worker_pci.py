"""NFD's own nfd-worker judges nfd-gpu's ``pci.device`` instances: its pci source, one
pass over each fixture's sysfs (``host-sys`` -> ROOT/sys), publishes a NodeFeature whose
``pci.device`` elements must be nfd-gpu's (the instances its rules see, featuremap.py), on
every fixture and on an ``nfd-gpu snapshot`` of it (a capture keeps what nfd-worker reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.scan import run_scan
from nfd_gpu.snapshot import take_snapshot
from tests.conftest import ALL_FIXTURES, fixture_root
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import NFD_NAMESPACE
from tests.e2e.test_cluster import run_nfd_worker
from tests.fixtures.derive_capture_files import derive


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
# reads (class, vendor, device, subsystem_*; snapshot.PEER_PCI_FILES): they are derived from
# the uevent it did save, the GPU's resource from its config and lspci -vvv
# (tests/fixtures/derive_capture_files.py, CAPTURE.md).
OLD_CAPTURES = ("h200-vm",)
JUDGED = list(ALL_FIXTURES)


@pytest.mark.parametrize("name", OLD_CAPTURES)
def test_old_capture_files_are_derived_from_its_uevent(name: str) -> None:
    root = fixture_root(name)
    files = derive(root)
    devices = sorted((root / "sys/bus/pci/devices").iterdir())
    assert len(files) == 5 * len(devices) + 1  # + the GPU's resource
    for path, text in files.items():
        assert path.read_text() == text, f"{path}: run tests/fixtures/derive_capture_files.py"
    # nothing the capture does not hold: resource where lspci -vvv was captured (the GPU),
    # config only where it was captured
    for f in ("resource", "config"):
        assert [d.name for d in devices if (d / f).exists()] == ["0000:00:06.0"], f
    gpu = (root / "sys/bus/pci/devices/0000:00:06.0/resource").read_text().splitlines()
    assert [line.split()[1] for line in gpu[:6:2]] == [  # end addresses: 16M, 256G, 32M
        "0x0000104002ffffff", "0x0000103fffffffff", "0x0000104001ffffff"
    ]  # fmt: skip


@pytest.mark.parametrize("name", JUDGED)
def test_nfd_worker_pci_device_equals_ours(
    kube_cluster: Cluster, tmp_path: Path, name: str
) -> None:
    root = fixture_root(name)
    theirs = nfd_workers(kube_cluster, root, f"pci-{name}", tmp_path / "fixture")
    assert theirs == ours(root)
    # the capture of that node: nfd-worker finds the same PCI functions in it
    capture = tmp_path / "capture"
    take_snapshot(capture, root)
    assert nfd_workers(kube_cluster, capture, f"pci-cap-{name}", tmp_path / "cap") == theirs
