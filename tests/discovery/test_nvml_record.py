"""Recording NVML answers: real pynvml struct/error shapes encode to the replay format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nfd_gpu.capture import capture_host
from nfd_gpu.discovery.nvidia import nvml
from nfd_gpu.discovery.nvidia import record as nvml_record
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root


@pytest.mark.real_pynvml
def test_encode_real_pynvml_shapes() -> None:
    pynvml = pytest.importorskip("pynvml")
    mem = pynvml.c_nvmlMemory_t()
    mem.total = 80 * 2**30
    assert nvml_record.encode(mem)["total"] == 80 * 2**30
    attrs = pynvml.c_nvmlDeviceAttributes()
    attrs.sharedJpegCount = 1
    assert nvml_record.encode(attrs)["sharedJpegCount"] == 1
    pci = pynvml.nvmlPciInfo_t()
    pci.busId = b"00000000:18:00.0"
    assert nvml_record.encode(pci)["busId"] == "00000000:18:00.0"
    assert nvml_record.encode((9, 0)) == [9, 0]
    err = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    assert nvml_record.error_name(err) == "GpuIsLost"
    assert nvml_record.error_name(RuntimeError()) == "Unknown"


def test_recorded_answers_replay_to_the_same_facts() -> None:
    rec = json.loads((fixture_root("dgx-a100-mig-mixed") / "nvml.json").read_text())
    recording = nvml_record.wrap(nvml_replay.build(rec))
    first = nvml.query(recording.module)
    again = nvml.query(nvml_replay.build(json.loads(json.dumps(recording.data))))
    assert first == again
    assert first is not None and len(first.partitions) == 13


def test_recorded_lost_gpu_and_failed_init(tmp_path: Path) -> None:
    root = fixture_root("h100-gpu-lost")
    lib = nvml_replay.load(str(root / "nvml.json"))
    dest = tmp_path / "lost"
    capture_host(dest, root, nvml_lib=lib)
    devices = json.loads((dest / "nvml.json").read_text())["devices"]
    assert any(d.get("error") == "GpuIsLost" or "GpuIsLost" in json.dumps(d) for d in devices)
    assert run_scan(dest).warnings == run_scan(root).warnings
    # nvmlInit failing (driver not loaded) is recorded and replays as the procfs fallback
    down = tmp_path / "down"
    capture_host(down, root, nvml_lib=nvml_replay.build({"nvmlInit": {"error": "DriverNotLoaded"}}))
    assert json.loads((down / "nvml.json").read_text()) == {
        "nvmlInit": {"error": "DriverNotLoaded"}
    }
    # the same root without a recording (a copy: links leaving a root are not followed)
    procfs_only = tmp_path / "procfs"
    shutil.copytree(root, procfs_only, symlinks=True)
    (procfs_only / "nvml.json").unlink()
    assert run_scan(down).labels == run_scan(procfs_only).labels
