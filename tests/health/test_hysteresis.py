"""Health across the agent's passes: a state that gets worse shows at once, one
that gets better only after ``health_hold_passes`` clear passes; a fault toggling every
pass never lets ``G/health`` back to ``ok``."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from nfd_gpu.agent import Agent
from nfd_gpu.config import loader as config
from nfd_gpu.health import HealthOptions, HealthTracker
from nfd_gpu.model import Gpu, Health, HealthReason, Snapshot
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"
AER = "sys/devices/pci0000:18/0000:18:00.0/aer_dev_fatal"


def _agent(root: Path, hold: int) -> Agent:
    flags = {"root": str(root), "udev": False, "outputs": "hook", "health_hold_passes": str(hold)}
    return Agent(config.load(env={}, flags=flags))


def _fatal(root: Path, n: int) -> None:
    (root / AER).write_text(f"Undefined 0\nSDES {n}\nTOTAL_ERR_FATAL {n}\n")


def test_toggling_fault_never_returns_to_ok_before_hold(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-aer-fatal"), root, symlinks=True)
    hold = 3
    agent = _agent(root, hold)
    seen = []
    for i in range(100):
        _fatal(root, i % 2)  # the fault comes and goes every pass, last seen on pass 100
        seen.append(agent.scan().labels.get(f"{G}/health"))
    assert seen == ["ok"] + ["failed"] * 99
    # the fault stays away: ok exactly after `hold` clear passes, not one earlier
    after = []
    for _ in range(hold + 2):
        _fatal(root, 0)
        after.append(agent.scan().labels.get(f"{G}/health"))
    assert after == ["failed"] * (hold - 1) + ["ok"] * 3
    # identity labels never moved with health
    assert agent.scan().labels[f"{G}/count"] == "2"


def test_worse_shows_at_once_and_unknown_keeps_state() -> None:
    t = HealthTracker(HealthOptions(hold_passes=2))

    def snap(*reasons: HealthReason, signals: tuple[str, ...] = ("sysfs.ras",)) -> Snapshot:
        g = Gpu(
            "0000:01:00.0",
            "amd",
            "1002",
            "740f",
            "120000",
            health=Health("unknown", reasons, signals),
        )
        return Snapshot(root="/", gpus=(g,))

    def state(s: Snapshot) -> str:
        return t.apply(s).gpus[0].health.state

    assert state(snap()) == "ok"
    assert state(snap(HealthReason("aer-nonfatal", "sysfs", 1))) == "degraded"
    assert state(snap(HealthReason("aer-fatal", "sysfs", 1))) == "failed"
    assert state(snap(signals=())) == "failed"  # nothing readable: not a clear pass
    assert state(snap(HealthReason("aer-nonfatal", "sysfs", 1))) == "failed"  # 1 better pass
    assert state(snap()) == "ok"  # the 2nd pass better than failed: it shows
    held = t.apply(snap(HealthReason("aer-fatal", "sysfs", 1)))
    assert held.gpus[0].health.reasons[0].severity == "failed"
    assert t.apply(snap()).gpus[0].health.reasons == held.gpus[0].health.reasons  # why, still


def test_bad_health_setting_is_one_line() -> None:
    import pytest

    with pytest.raises(ValueError, match="health_nonfatal_xids: 'x13'"):
        HealthOptions.from_settings(3, ["x13"], 1, 0)
    with pytest.raises(ValueError, match="health_hold_passes"):
        HealthOptions.from_settings(2.5, [], 1, 0)


def test_gpu_gone_from_the_bus_is_lost_until_it_returns(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-aer-fatal"), root, symlinks=True)
    _fatal(root, 0)
    agent = _agent(root, 2)
    assert agent.scan().labels[f"{G}/health"] == "ok"
    link = root / "sys/bus/pci/devices/0000:2a:00.0"
    target = link.readlink()
    link.unlink()  # the second GPU falls off the bus
    labels = agent.scan().labels
    assert labels[f"{G}/count"] == "1"
    assert labels[f"{G}/health"] == "failed"
    assert labels[f"{G}/health.failed.count"] == "1"
    assert labels[f"{G}/health.lost.count"] == "1"
    link.symlink_to(target)  # back (reset, rescan)
    labels = agent.scan().labels
    assert labels[f"{G}/health"] == "ok" and f"{G}/health.lost.count" not in labels


def _flapping(pattern: list[bool], hold: int = 3) -> list[str]:
    """The states shown over a pass pattern (True: the fault reads on that pass)."""
    t = HealthTracker(HealthOptions(hold_passes=hold))
    out = []
    for fault in pattern:
        reasons = (HealthReason("aer-fatal", "sysfs", 1),) if fault else ()
        g = Gpu("0000:01:00.0", "amd", "1002", "740f", "120000",
                health=Health("unknown", reasons, ("sysfs.ras",)))  # fmt: skip
        out.append(t.apply(Snapshot(root="/", gpus=(g,))).gpus[0].health.state)
    return out


def _flips(states: list[str]) -> int:
    return sum(1 for a, b in itertools.pairwise(states) if a != b)


def test_a_recurring_fault_is_held_down() -> None:
    """A fault read one pass in six (e.g. 40 passes of 1 s): the state must not follow
    it. On main: failed -> ok -> failed every six passes (26 flips in 80 passes)."""
    pattern = [i % 6 == 0 for i in range(240)]
    states = _flapping(pattern)
    assert _flips(states) <= 3, states[:40]
    assert states[-1] == "failed"
    # once it stops recurring the GPU comes back, after a bounded backoff
    calm = _flapping(pattern + [False] * 30)
    assert calm[-1] == "ok"
    back = calm.index("ok", 240)
    assert back - 240 <= 3 * 8  # at most MAX_BACKOFF holds


def test_a_single_fault_still_clears_after_one_hold() -> None:
    states = _flapping([True] + [False] * 5)
    assert states == ["failed", "failed", "failed", "ok", "ok", "ok"]


def test_the_backoff_ends_after_a_calm_stretch() -> None:
    pattern = [i % 6 == 0 for i in range(240)] + [False] * 200 + [True] + [False] * 5
    assert _flapping(pattern)[-6:] == ["failed"] * 3 + ["ok"] * 3
