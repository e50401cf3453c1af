"""Intel depth (i915 / xe sysfs) and the ``intel`` compatibility profile."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from nfd_gpu.discovery.intel import sysfs as intel
from nfd_gpu.host import HostRoot
from nfd_gpu.labels import intel as intel_profile
from nfd_gpu.labels.validate import check_label
from nfd_gpu.model import Gpu
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, REPO, fixture_root

G = "gpu.feature.node.kubernetes.io"
IN = "gpu.intel.com"


def test_parse_bytes() -> None:
    assert intel.parse_bytes("17179869184\n") == 17179869184
    assert intel.parse_bytes("0x1f90") == 8080
    assert intel.parse_bytes("8086") == 8086
    assert intel.parse_bytes("") is None
    assert intel.parse_bytes(None) is None
    assert intel.parse_bytes("-5") is None
    assert intel.parse_bytes("lots") is None


@given(st.text())
def test_parse_bytes_total(text: str) -> None:
    v = intel.parse_bytes(text)
    assert v is None or v >= 0


def test_max1550_on_xe_tiles_and_vram() -> None:
    r = run_scan(fixture_root("max1550-xe"), profiles=("neutral", "intel"))
    assert r.warnings == []
    gpus = r.snapshot.gpus
    assert len(gpus) == 4  # the ASPEED BMC VGA is not an Intel GPU
    assert {g.intel.tiles for g in gpus} == {2}
    assert {g.provenance["tiles"] for g in gpus} == {"sysfs"}
    assert {g.memory_mib for g in gpus} == {131072}  # 2 tiles x 64 GiB
    assert {g.driver for g in gpus} == {"xe"}
    labels = r.labels
    assert labels[f"{G}/driver"] == "xe"
    assert labels[f"{G}/family"] == "xe-hpc"
    assert labels[f"{G}/memory-mib"] == "131072"
    assert labels[f"{IN}/device-id.0380-0bd5.present"] == "true"
    assert labels[f"{IN}/device-id.0380-0bd5.count"] == "4"
    assert labels[f"{IN}/product"] == "Max_1550"
    assert labels[f"{IN}/family"] == "Max_Series"
    assert labels[f"{IN}/tiles"] == "8"
    assert labels[f"{IN}/memory.max"] == str(4 * 128 << 30)
    assert labels["intel.feature.node.kubernetes.io/gpu"] == "true"


def test_arc_a770_on_i915() -> None:
    r = run_scan(fixture_root("arc-a770"), profiles=("neutral", "intel"))
    assert r.warnings == []
    (gpu,) = r.snapshot.gpus
    assert gpu.intel.tiles == 1  # drm/card0/gt/gt0
    assert gpu.intel.local_memory_bytes == 16 << 30
    assert r.labels[f"{G}/memory-mib"] == "16384"
    assert r.labels[f"{G}/driver"] == "i915"
    assert r.labels[f"{IN}/device-id.0300-56a0.count"] == "1"
    assert r.labels[f"{IN}/family"] == "A_Series"
    assert f"{IN}/product" not in r.labels  # upstream has no product rule for A-series
    assert r.labels[f"{IN}/memory.max"] == str(16 << 30)


def test_flex170_profile_counts_functions_as_intels_rules() -> None:
    r = run_scan(fixture_root("flex170-sriov"), profiles=("neutral", "intel"))
    labels = r.labels
    # Intel's rule counts NFD pci.device elements: PF + 8 VFs (the neutral count is GPUs)
    assert labels[f"{IN}/device-id.0380-56c0.count"] == "9"
    assert labels["gpu.feature.node.kubernetes.io/intel.count"] == "1"
    assert labels[f"{IN}/product"] == "Flex_170"
    assert labels[f"{IN}/tiles"] == "1"


def _copy(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(fixture_root(name), root, symlinks=True)
    return root


def test_i915_multi_tile_lmem_and_xe_link(tmp_path: Path) -> None:
    """Two gt dirs -> 2 tiles, lmem_total_bytes x tiles (the labeler's formula); an
    ``i915.iaf.0/iaf_fabric_id`` attribute means Xe Link."""
    root = _copy("arc-a770", tmp_path)
    dev = root / "sys/devices/pci0000:03/0000:03:00.0"
    (dev / "drm/card0/gt/gt1").mkdir()
    (dev / "drm/card0/lmem_total_bytes").write_text("0x200000000\n")  # 8 GiB
    (dev / "i915.iaf.0").mkdir()
    (dev / "i915.iaf.0/iaf_fabric_id").write_text("0x1\n")
    r = run_scan(root, profiles=("neutral", "intel"))
    (gpu,) = r.snapshot.gpus
    assert gpu.intel.tiles == 2
    assert gpu.intel.local_memory_bytes == 16 << 30
    assert "xe-link" in gpu.interconnects
    assert r.labels[f"{G}/interconnect.xelink"] == "true"
    assert r.labels[f"{IN}/tiles"] == "2"


def test_iaf_dir_without_fabric_id_is_no_xe_link(tmp_path: Path) -> None:
    root = _copy("arc-a770", tmp_path)
    (root / "sys/devices/pci0000:03/0000:03:00.0/iaf.0").mkdir()
    labels = run_scan(root).labels
    assert f"{G}/interconnect.xelink" not in labels


def test_tiles_without_tile_dirs(tmp_path: Path) -> None:
    """Driver bound but no tile directories: 1 tile (Intel's labeler); no driver at all:
    the model table's tile count."""
    root = _copy("max1550-xe", tmp_path)
    for d in (root / "sys/devices").glob("pci*/0000:*:00.0/tile*"):
        shutil.rmtree(d)
    r = run_scan(root, profiles=("intel",))
    assert {g.intel.tiles for g in r.snapshot.gpus} == {1}
    assert {g.intel.local_memory_bytes for g in r.snapshot.gpus} == {None}
    assert r.labels[f"{IN}/memory.max"] == "0"

    gpu = Gpu(
        address="0000:29:00.0",
        vendor="intel",
        vendor_id="8086",
        device_id="0bd5",
        class_id="038000",
    )
    (unbound,) = intel.enrich(HostRoot(tmp_path / "empty"), (gpu,))
    assert unbound.intel.tiles == 2
    assert unbound.provenance["tiles"] == "table"


def test_other_vendors_untouched() -> None:
    r = run_scan(fixture_root("mi210-8x"), profiles=("intel",))
    assert r.labels == {}


def test_intel_labels_doc_is_generated() -> None:
    assert (REPO / "docs/labels-intel.md").read_text() == intel_profile.render_docs(), (
        "docs/labels-intel.md is stale: run `python -m nfd_gpu.labels.intel > docs/labels-intel.md`"
    )


def test_every_intel_label_is_documented_and_valid() -> None:
    for name in ALL_FIXTURES:
        for key, value in run_scan(fixture_root(name), profiles=("intel",)).labels.items():
            assert intel_profile.documented(key), (name, key)
            assert check_label(key, value) is None, (name, key, value)
