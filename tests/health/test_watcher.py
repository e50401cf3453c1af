"""The XID watcher follows NVML: a pod started before the driver still catches a later
XID 48, a reload to ``nvml: off`` stops it; the boot set of GPUs comes only from a complete
pass; every GPU lost is still ``failed`` (docs/health.md "The XID watcher")."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from nfd_gpu import host as hostroot
from nfd_gpu.agent import Agent
from nfd_gpu.config import loader as config
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"


def _agent(root: Path, **flags: str) -> Agent:
    return Agent(
        config.load(env={}, flags={"root": str(root), "udev": False, "outputs": "hook", **flags})
    )


def _until(agent: Agent, want: str, passes: int = 50) -> list[str | None]:
    """Scan until ``G/health`` is ``want`` (the watcher's thread reads between passes)."""
    seen: list[str | None] = []
    for _ in range(passes):
        seen.append(agent.scan().labels.get(f"{G}/health"))
        if seen[-1] == want:
            return seen
        time.sleep(0.05)
    return seen


def test_pod_started_before_the_driver_catches_a_later_xid_48(tmp_path: Path) -> None:
    """First passes: nvmlInit fails (driver not loaded yet); then the driver is up and
    an XID 48 arrives. On main the watcher was tried once, at the first pass, and never
    again: ``health`` stayed ``ok`` for ever."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-xid-48"), root, symlinks=True)
    rec = json.loads((root / "nvml.json").read_text())
    down = dict(rec, nvmlInit={"error": "DriverNotLoaded"})
    (root / "nvml.json").write_text(json.dumps(down))
    agent = _agent(root)
    for _ in range(2):
        agent.scan()
        assert agent.health.watcher is None
    (root / "nvml.json").write_text(json.dumps(rec))  # the driver container finished
    seen = _until(agent, "failed")
    assert agent.health.watcher is not None and agent.health.tracker.watching
    assert seen[-1] == "failed", seen
    elements = agent.scan().features["instances"]["gpu.device"]["elements"]
    reasons = {e["attributes"]["address"]: e["attributes"].get("health.reasons") for e in elements}
    assert reasons["0000:18:00.0"] == "xid-48"
    agent.health.stop()


def test_reload_to_nvml_off_stops_the_watcher(tmp_path: Path) -> None:
    root = fixture_root("h100-xid-79")
    agent = _agent(root)
    agent.scan()
    watcher = agent.health.watcher
    assert watcher is not None and watcher.running()
    for _ in range(100):  # its thread reads the recorded XID 79
        if watcher.counts:
            break
        time.sleep(0.02)
    off = config.load(
        env={}, flags={"root": str(root), "udev": False, "outputs": "hook", "nvml": "off"}
    )
    agent.cfg = off
    agent.health.reload(off)
    agent.scan()
    assert agent.health.watcher is None and not agent.health.tracker.watching
    assert not watcher.running()  # told to stop: on main it kept running
    # the XID it read stays a fault of its GPU
    assert agent.scan().labels[f"{G}/health"] == "failed"


def test_boot_set_comes_only_from_a_complete_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pass cannot list the bus; on main it became the boot set (no GPU), so a
    GPU that fell off later was never ``lost``."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    agent = _agent(root, nvml="off")
    real = os.listdir

    def broken(path: object) -> list[str]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(hostroot.os, "listdir", broken)
    res = agent.scan()
    assert not res.complete
    monkeypatch.setattr(hostroot.os, "listdir", real)
    assert f"{G}/health.lost.count" not in agent.scan().labels  # the boot set: 8 GPUs
    (root / "sys/bus/pci/devices/0000:18:00.0").unlink()  # one falls off the bus
    labels = agent.scan().labels
    assert labels[f"{G}/health.lost.count"] == "1"
    assert labels[f"{G}/health"] == "failed"


def test_every_gpu_lost_is_failed(tmp_path: Path) -> None:
    """A one-GPU node whose GPU fell off the bus: on main no health label at all, so the
    taint rule could not fire."""
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-xid-79"), root, symlinks=True)
    agent = _agent(root, nvml="off")
    agent.scan()
    for bdf in ("0000:18:00.0", "0000:2a:00.0"):
        (root / f"sys/bus/pci/devices/{bdf}").unlink()
    labels = agent.scan().labels
    assert labels[f"{G}/health"] == "failed"
    assert labels[f"{G}/health.lost.count"] == "2"
    assert labels[f"{G}/health.all-failed"] == "true"
