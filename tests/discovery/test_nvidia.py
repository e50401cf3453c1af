"""NVIDIA discovery: procfs parsing, the NVML adapter under a fake pynvml, MIG naming."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from nfd_gpu.discovery.nvidia import nvml, procfs
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.host import HostRoot
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"
PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  440.82  Wed Apr  1 20:04:33 UTC 2020\n"
    "GCC version:  gcc version 9.3.0 (Arch Linux 9.3.0-1)\n"
)
OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.77  Release Build  "
    "(nixbld@)  Sun Feb  9 11:08:26 UTC 2025\n"
)


def test_version_file_both_formats() -> None:
    assert procfs.parse_version_file(PROPRIETARY) == ("440.82", "proprietary")
    assert procfs.parse_version_file(OPEN) == ("565.77", "open")
    assert (
        procfs.parse_version_file(
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"
        )[0]
        == "580.95.05"
    )
    assert procfs.parse_version_file("garbage") == (None, None)


def test_information_file_with_tabs() -> None:
    info = procfs.parse_information(
        "Model: \t\t NVIDIA A10G\nGPU UUID: \t GPU-82523fd8-3897-f599-d088-ccd04ae45ec1\n"
        "Bus Location: \t 0000:00:1e.0\nDevice Minor: \t 3\n"
    )
    assert info["Model"] == "NVIDIA A10G"
    assert info["GPU UUID"].startswith("GPU-8252")
    assert info["Device Minor"] == "3"


def test_read_procfs_fixture() -> None:
    facts = procfs.read_procfs(HostRoot(fixture_root("dgx-a100-mig-mixed")))
    assert facts.driver_version == "550.54.15"
    assert facts.kernel_module == "open"
    assert len(facts.gpus) == 8
    assert facts.gpus[0].product == "NVIDIA A100-SXM4-40GB"
    assert facts.gpus[0].minor == 0
    assert len(facts.partitions) == 4 + 7 + 2
    assert {p.profile for p in facts.partitions} == {"unknown"}
    assert "nvidiactl" in facts.device_nodes


@pytest.mark.parametrize(
    ("mem_mib", "total_mib", "name"),
    [
        (4864, 40536, 5),
        (9984, 40536, 10),
        (20096, 40536, 20),
        (9984, 81559, 10),
        (40448, 81559, 40),
    ],
)
def test_mig_memory_rounding(mem_mib: int, total_mib: int, name: int) -> None:
    assert nvml.mig_memory_gb(mem_mib, total_mib * 2**20) == name


def test_profile_names() -> None:
    assert nvml.profile_name(3, 3, 20, "") == "3g.20gb"
    assert nvml.profile_name(3, 1, 20, "") == "1c.3g.20gb"
    assert nvml.profile_name(1, 1, 5, "+me") == "1g.5gb+me"


def _recording(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((fixture_root(name) / "nvml.json").read_text())
    return data


def test_adapter_under_fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml_replay.build(_recording("dgx-a100-mig-mixed")))
    facts = nvml.query()
    assert facts is not None
    assert facts.driver_version == "550.54.15"
    assert facts.cuda_version == "12.4"
    assert facts.gpus[0].memory_mib == 40960
    assert facts.gpus[0].mig_enabled is True
    assert facts.gpus[3].mig_enabled is False
    names = sorted(p.profile for p in facts.partitions if p.parent == "0000:07:00.0")
    assert names == ["1g.5gb", "1g.5gb+me", "2g.10gb", "3g.20gb"]
    assert sorted(p.profile for p in facts.partitions if p.parent == "0000:47:00.0") == [
        "1c.3g.20gb",
        "4g.20gb",
    ]


def test_init_failure_falls_back_and_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _recording("h100-mig-single")
    monkeypatch.setitem(
        sys.modules, "pynvml", nvml_replay.build({**rec, "nvmlInit": {"error": "DriverNotLoaded"}})
    )
    with pytest.raises(nvml.InitFailed, match="Driver Not Loaded"):
        nvml.query()
    monkeypatch.setitem(sys.modules, "pynvml", nvml_replay.build(rec))
    assert nvml.query() is not None  # no state kept: the next pass initialises


def test_missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    assert nvml.query() is None


def test_missing_shared_library_skips_the_pynvml_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the NVML library nvmlInit cannot succeed: pynvml is not even imported."""
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.setattr(nvml, "NVML_SONAME", "libnvidia-ml-absent-for-this-test.so.1")
    assert nvml.query() is None
    assert "pynvml" not in sys.modules
    monkeypatch.setattr(nvml, "NVML_SONAME", "libc.so.6")  # a library that opens
    assert nvml.library_error() is None


def test_not_supported_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml_replay.build(_recording("a100-t4")))
    facts = nvml.query()
    assert facts is not None
    t4 = facts.gpus[1]
    assert t4.product == "Tesla T4"
    assert t4.mig_capable is False
    assert facts.warnings == ()


def test_gpu_lost_is_a_warning_for_that_gpu() -> None:
    r = run_scan(fixture_root("h100-gpu-lost"))
    assert [w for w in r.warnings if "GPU is lost" in w] == [
        "nvml: GPU 1: GPU is lost; using procfs/PCI facts for it"
    ]
    g0, g1 = r.snapshot.gpus
    assert g0.provenance["product"] == "nvml" and g1.provenance["product"] == "procfs"
    assert (g0.nvidia.nvml_answered, g1.nvidia.nvml_answered) == (True, False)
    assert g1.uuid is not None and g1.uuid.startswith("GPU-")
    assert r.labels[f"{G}/count"] == "2"


def test_fake_errors_match_pynvml_shape() -> None:
    mod = nvml_replay.build({})
    err = mod.NVMLError(15)
    assert type(err).__name__ == "NVMLError_GpuIsLost"
    assert isinstance(err, mod.NVMLError) and str(err) == "GPU is lost"
    assert mod.NVMLError_NotSupported().value == 3


@pytest.mark.parametrize("name", ["h100-mig-single", "dgx-a100-mig-mixed", "a100-t4"])
def test_labels_without_nvml_agree_on_shared_facts(name: str, tmp_path: Path) -> None:
    """Remove the recording: the procfs path still scans and shared labels are unchanged."""
    root = tmp_path / name
    shutil.copytree(fixture_root(name), root, symlinks=True)
    (root / "nvml.json").unlink()
    with_nvml = run_scan(fixture_root(name)).labels
    without = run_scan(root).labels
    shared = set(with_nvml) & set(without)
    assert {k: without[k] for k in shared} == {k: with_nvml[k] for k in shared}
    assert f"{G}/product" in shared and f"{G}/nvidia.driver.version" in shared
    if name != "a100-t4":
        assert without[f"{G}/mig.enabled"] == "true"
        assert without[f"{G}/partitions"] == with_nvml[f"{G}/partitions"]


def test_driver_not_loaded_uses_tables() -> None:
    r = run_scan(fixture_root("h100-no-driver"))
    assert r.labels[f"{G}/product"] == "NVIDIA-H100-80GB-HBM3"
    assert r.labels[f"{G}/driver"] == "none"
    assert r.snapshot.partitions == ()


def test_nvml_bus_ids_of_any_domain_width() -> None:
    """NVML's busId ("%08X") is matched as a number: the 32-bit Hyper-V domain is kept whole
    (NVIDIA/nvidia-docker#1316), and a busId that is no address is a warning for that GPU."""
    rec = _recording("hyperv-p100-vm")
    facts = nvml.query(nvml_replay.build(rec))
    assert facts is not None
    assert [g.address for g in facts.gpus] == ["3f8f31a:00:00.0"]
    devices = rec["devices"]
    assert isinstance(devices, list)
    devices[0]["nvmlDeviceGetPciInfo"] = {"busId": "GPU on VMBus"}
    facts = nvml.query(nvml_replay.build(rec))
    assert facts is not None and facts.gpus == ()
    assert facts.warnings == (
        "nvml: GPU 0: PCI bus id 'GPU on VMBus' is not an address; using procfs/PCI facts for it",
    )
