"""AMD depth: KFD parsers, sysfs enrichment, partitions, XGMI, the pyamdgpuinfo adapter."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nfd_gpu.discovery.amd import amdgpuinfo
from nfd_gpu.discovery.amd import sysfs as amd
from nfd_gpu.host import HostRoot
from nfd_gpu.labels.amd import product_name, vram_label
from nfd_gpu.model import Gpu
from nfd_gpu.scan import discover, run_scan
from tests.conftest import fixture_root


def test_gfx_name() -> None:
    assert amd.gfx_name(90010) == "gfx90a"
    assert amd.gfx_name(90402) == "gfx942"
    assert amd.gfx_name(110000) == "gfx1100"
    assert amd.gfx_name(0) is None
    assert amd.gfx_name(None) is None


def test_location_address() -> None:
    assert amd.location_address(0, 25344) == "0000:63:00.0"
    assert amd.location_address(1, 1287) == "0001:05:00.7"
    assert amd.slot_of("0001:05:00.7") == (1, 5, 0)
    # an 8-digit (Hyper-V) domain is kept whole, as the kernel names the function
    assert amd.location_address(0x3F8CFDD, 25344) == "3f8cfdd:63:00.0"
    assert amd.slot_of("3F8CFDD:63:00.1") == amd.slot_of("03f8cfdd:63:00.0")


def test_partition_files() -> None:
    assert amd.parse_partition_list("SPX, DPX, QPX, CPX\n") == ("cpx", "dpx", "qpx", "spx")
    assert amd.parse_partition_list("Not supported") == ()
    assert amd.parse_partition_mode("CPX\n") == "cpx"
    assert amd.parse_partition_mode("") is None


def test_parse_properties_skips_junk() -> None:
    text = "simd_count 416\nbad line here\nunique_id 18446744073709551615\nx zz\n"
    assert amd.parse_properties(text) == {"simd_count": 416, "unique_id": 2**64 - 1}


@given(st.text())
def test_parse_properties_never_raises(text: str) -> None:
    for k, v in amd.parse_properties(text).items():
        assert isinstance(k, str) and isinstance(v, int)


@given(st.integers())
def test_gfx_name_total(v: int) -> None:
    name = amd.gfx_name(v)
    assert name is None or (name.startswith("gfx") and name[3:].isalnum())


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_location_address_is_a_pci_address(dom: int, loc: int) -> None:
    a = amd.location_address(dom, loc)
    assert len(a) == 12 and a[4] == ":" and a[7] == ":" and a[10] == "."


@given(st.text())
def test_partition_parsers_total(text: str) -> None:
    assert all(p.isalnum() for p in amd.parse_partition_list(text))
    m = amd.parse_partition_mode(text)
    assert m is None or m.isalnum()


@given(st.text())
def test_product_name_is_the_labellers_replacer(raw: str) -> None:
    # strings.NewReplacer(" ", "_", "(", "", ")", "") on the trimmed name, nothing else
    v = product_name(raw)
    assert v == raw.strip().replace(" ", "_").replace("(", "").replace(")", "")


def test_product_name_sanitising() -> None:
    assert product_name("AMD Instinct MI250X / MI250") == "AMD_Instinct_MI250X_/_MI250"
    assert product_name("AMD INSTINCT MI250X (MCM) OAM") == "AMD_INSTINCT_MI250X_MCM_OAM"


def test_invalid_product_name_is_dropped_with_a_warning(tmp_path: Path) -> None:
    # the labeller's node update fails on it (ROCm/k8s-device-plugin#218); nfd-gpu drops
    # that one label and keeps the rest
    root = tmp_path / "root"
    shutil.copytree(fixture_root("mi210-8x"), root, symlinks=True)
    for f in (root / "sys/devices").rglob("product_name"):
        f.write_text("AMD Instinct MI250X / MI250\n")
    r = run_scan(root, profiles=("amd",))
    assert "amd.com/gpu.product-name" not in r.labels
    assert r.labels["amd.com/gpu.device-id"] == "740f"
    assert any("product-name" in w for w in r.warnings)


def test_vram_label_rounds() -> None:
    assert vram_label(65520) == "64G"
    assert vram_label(65536) == "64G"
    assert vram_label(49152) == "48G"
    assert vram_label(1536) == "2G"


def test_mi210_kfd_capture() -> None:
    nodes = amd.read_kfd(HostRoot(fixture_root("mi210-8x")))
    assert len(nodes) == 8  # CPU nodes 0 and 1 skipped
    assert {n.gfx for n in nodes} == {"gfx90a"}
    assert {n.compute_units for n in nodes} == {104}
    assert {n.device_id for n in nodes} == {"740f"}
    assert all(n.xgmi_peers for n in nodes)


def test_mi210_snapshot() -> None:
    snap = discover(HostRoot(fixture_root("mi210-8x")))
    for g in snap.gpus:
        assert g.amd.simd_count == 416
        assert g.compute_units == 104
        assert g.memory_mib == 65536
        assert g.provenance["memory_mib"] == "sysfs"
        assert g.amd.board_product == "Instinct MI210"
        assert g.interconnects == ("xgmi",)
        assert g.amd.xgmi_peers == 3  # two XGMI islands of four
        assert g.uuid
    assert snap.partitions == ()


def _gpu(addr: str = "0000:03:00.0") -> Gpu:
    return Gpu(addr, "amd", "1002", "740f", "120000", mode="container")


def test_partitioning_supported_is_the_file_not_its_list(tmp_path: Path) -> None:
    """The labeller's partitioning-supported is the sysfs file's presence: an empty
    available_compute_partition is still supported, a missing one is not."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("mi300x-cpx-nps4"), root, symlinks=True)
    devices = sorted((root / "sys/devices").glob("pci*/*/available_compute_partition"))
    devices[0].write_text("")
    (devices[1].parent / "available_memory_partition").unlink()
    by_addr = {g.address: g.amd for g in discover(HostRoot(str(root))).gpus}
    first, second = by_addr[devices[0].parent.name], by_addr[devices[1].parent.name]
    assert (first.compute_partitions_available, first.compute_partitioning_supported) == (
        (),
        True,
    )
    assert (second.memory_partitions_available, second.memory_partitioning_supported) == (
        (),
        False,
    )
    assert second.compute_partitioning_supported is True


def test_pyamdgpuinfo_fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pyamdgpuinfo")
    gpu = types.SimpleNamespace(
        pci_slot="0000:03:00.0", name="AMD Instinct MI210", memory_info={"vram_size": 64 << 30}
    )
    fake.detect_gpus = lambda: 1  # type: ignore[attr-defined]
    fake.get_gpu = lambda i: gpu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyamdgpuinfo", fake)
    host = HostRoot("/nonexistent")
    infos = amdgpuinfo.query(host, force=True)
    assert infos["0000:03:00.0"].vram_bytes == 64 << 30
    (g,) = amdgpuinfo.apply((_gpu(),), infos)
    assert g.product == "AMD Instinct MI210"
    assert g.memory_mib == 65536
    assert g.provenance["product"] == "pyamdgpuinfo"
    assert host.warnings == []


def test_pyamdgpuinfo_failure_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pyamdgpuinfo")

    def boom() -> int:
        raise OSError("amdgpu_device_initialize failed")

    fake.detect_gpus = boom  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyamdgpuinfo", fake)
    host = HostRoot("/nonexistent")
    assert amdgpuinfo.query(host, force=True) == {}
    assert any("pyamdgpuinfo: detect_gpus failed" in w for w in host.warnings)


def test_pyamdgpuinfo_get_gpu_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pyamdgpuinfo")
    fake.detect_gpus = lambda: 2  # type: ignore[attr-defined]

    def get_gpu(i: int) -> object:
        raise RuntimeError("GPU not found")

    fake.get_gpu = get_gpu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyamdgpuinfo", fake)
    host = HostRoot("/nonexistent")
    assert amdgpuinfo.query(host, force=True) == {}
    assert len(host.warnings) == 2


def test_pyamdgpuinfo_real_module_never_crashes() -> None:
    """The installed library (when importable) raises without a usable /dev/dri:
    the adapter returns what it can and turns the rest into warnings."""
    pytest.importorskip("pyamdgpuinfo")
    host = HostRoot("/")
    infos = amdgpuinfo.query(host, force=True)
    assert isinstance(infos, dict)
    if not Path("/dev/dri").is_dir():
        assert infos == {}


def test_pyamdgpuinfo_only_on_the_real_root() -> None:
    assert amdgpuinfo.query(HostRoot(fixture_root("mi210-8x"))) == {}


def test_in_tree_driver_gives_empty_driver_version(tmp_path: Path) -> None:
    # an in-tree amdgpu has no module version file: the labeller writes driver-version=""
    from tests.labels.amd_labeller_oracle import ALL_FLAGS, labeller_output

    root = tmp_path / "root"
    shutil.copytree(fixture_root("mi210-8x"), root, symlinks=True)
    (root / "sys/module/amdgpu/version").unlink()
    opts = ("amd-driver-version",)
    labels = run_scan(root, profiles=("amd",), profile_options=opts).labels
    assert labels["amd.com/gpu.driver-version"] == ""
    assert labeller_output(root, ALL_FLAGS)["amd.com/gpu.driver-version"] == ""
