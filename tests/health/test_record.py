"""``nfd-gpu snapshot`` records the NVML health calls: a recording made through
the recorder replays to the same health, argument-keyed answers included."""

from __future__ import annotations

import json
from pathlib import Path

from nfd_gpu.capture import capture_host
from nfd_gpu.discovery.nvidia import nvml, record, replay
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

HEALTH_KEYS = (
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetNvLinkState",
)


def test_recorder_keeps_every_health_answer() -> None:
    source = json.loads((fixture_root("h100-nvlink-down") / "nvml.json").read_text())
    rec = record.wrap(replay.build(source))
    facts = nvml.query(rec.module)
    assert facts is not None
    for got, want in zip(rec.data["devices"], source["devices"], strict=True):
        for key in HEALTH_KEYS:
            if key == "nvmlDeviceGetNvLinkState":  # links asked: up to the library's maximum
                assert got[key].items() <= want[key].items() and len(got[key]) >= 18
            else:
                assert got[key] == want[key], key
    again = nvml.query(replay.build(replay.validate(json.loads(json.dumps(rec.data)))))
    assert again is not None
    assert [g.health_reasons for g in again.gpus] == [g.health_reasons for g in facts.gpus]
    assert facts.gpus[1].health_reasons[0].reason == "nvlink-down"
    assert facts.gpus[1].health_reasons[0].value == 2


def test_bad_health_answers_are_one_line_errors() -> None:
    import pytest

    source = json.loads((fixture_root("h100-remap-pending") / "nvml.json").read_text())
    source["devices"][0]["nvmlDeviceGetRemappedRows"] = [0, 1]
    with pytest.raises(replay.RecordingError, match=r"devices\[0\].nvmlDeviceGetRemappedRows"):
        replay.validate(source)
    source["devices"][0]["nvmlDeviceGetRemappedRows"] = [0, 0, 0, 0]
    source["events"] = [{"device": 7, "type": 8, "data": 79}]
    with pytest.raises(replay.RecordingError, match=r"events\[0\]"):
        replay.validate(source)


def test_snapshot_copies_the_health_files(tmp_path: Path) -> None:
    for name in ("h100-aer-fatal", "mi210-ras-ue"):
        dest = tmp_path / name
        capture_host(dest, fixture_root(name))
        want = run_scan(fixture_root(name))
        got = run_scan(dest)
        assert [g.health for g in got.snapshot.gpus] == [g.health for g in want.snapshot.gpus]
        assert got.labels["gpu.feature.node.kubernetes.io/health"] == "failed"


def test_snapshot_records_the_xid_event_stream(tmp_path: Path) -> None:
    source = json.loads((fixture_root("h100-xid-48") / "nvml.json").read_text())
    dest = tmp_path / "snap"
    capture_host(dest, fixture_root("h100-xid-48"), nvml_lib=replay.build(source), xid_seconds=0.3)
    recorded = json.loads((dest / "nvml.json").read_text())
    assert recorded["events"] == source["events"]
    for key in HEALTH_KEYS[:-1]:  # the watcher's calls kept what the scan recorded
        assert recorded["devices"][1][key] == source["devices"][1][key], key
    links = recorded["devices"][1]["nvmlDeviceGetNvLinkState"]
    assert links.items() <= source["devices"][1]["nvmlDeviceGetNvLinkState"].items()
