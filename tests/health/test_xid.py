"""The XID watcher: NVML's event set replayed from a fixture's recording, recorded
through the recorder and replayed again, handed to the agent's health between passes."""

from __future__ import annotations

import json
import time
from pathlib import Path

from nfd_gpu.agent import Agent
from nfd_gpu.agent.health import AgentHealth
from nfd_gpu.agent.loop import STOP_GRACE
from nfd_gpu.config import loader as config
from nfd_gpu.discovery.nvidia import record, replay
from nfd_gpu.discovery.nvidia.events import XidWatcher, library
from nfd_gpu.scan import run_scan
from tests.agent_process import agent_env, agent_process, sigterm
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"


def _drained(w: XidWatcher) -> list[tuple[str, int]]:
    while w.poll(1):
        pass
    return w.drain()


def test_replayed_xid_events_name_gpu_and_code() -> None:
    w = XidWatcher(replay.load(str(fixture_root("h100-xid-48") / "nvml.json")))
    assert w.open(), w.error
    assert _drained(w) == [("0000:18:00.0", 48), ("0000:2a:00.0", 13)]
    assert w.counts == {48: 1, 13: 1}
    assert not w.poll(1)  # idle: the wait times out
    w.close()


def test_event_stream_recorded_and_replayed() -> None:
    source = json.loads((fixture_root("h100-xid-48") / "nvml.json").read_text())
    rec = record.wrap(replay.build(source))
    w = XidWatcher(rec.module)
    assert w.open(), w.error
    first = _drained(w)
    w.close()
    assert rec.data["events"] == source["events"]
    again = XidWatcher(replay.build(replay.validate(json.loads(json.dumps(rec.data)))))
    assert again.open()
    assert _drained(again) == first


def _agent_with_watcher(name: str) -> Agent:
    root = fixture_root(name)
    agent = Agent(config.load(env={}, flags={"root": str(root), "udev": False, "outputs": "hook"}))
    w = XidWatcher(replay.load(str(root / "nvml.json")))
    assert w.open()
    while w.poll(1):  # what the thread reads between two passes
        pass
    agent.health.watcher = w
    agent.health.tracker.watching = True
    return agent


def test_fatal_xid_fails_its_gpu_non_fatal_does_not() -> None:
    agent = _agent_with_watcher("h100-xid-48")
    res = agent.scan()
    assert res.labels[f"{G}/health"] == "failed"
    assert res.labels[f"{G}/health.failed.count"] == "1"
    elements = res.features["instances"]["gpu.device"]["elements"]
    by_addr = {e["attributes"]["address"]: e["attributes"] for e in elements}
    assert by_addr["0000:18:00.0"]["health.reasons"] == "xid-48"
    assert by_addr["0000:2a:00.0"]["health"] == "ok"  # XID 13: an application error
    assert "health.reasons" not in by_addr["0000:2a:00.0"]
    # kept: the next pass still fails the GPU (until the agent restarts)
    assert agent.scan().labels[f"{G}/health"] == "failed"


def test_xid_79_fails_and_scan_alone_reads_no_event() -> None:
    assert run_scan(fixture_root("h100-xid-79")).labels[f"{G}/health"] == "ok"
    res = _agent_with_watcher("h100-xid-79").scan()
    assert res.labels[f"{G}/health.failed.count"] == "1"


def test_agent_starts_watcher_and_stops_it_within_shutdown_time() -> None:
    root = fixture_root("h100-xid-79")
    cfg = config.load(env={}, flags={"root": str(root), "udev": False, "outputs": "hook"})
    h = AgentHealth(cfg)
    h.after_scan(run_scan(root), "replay")
    assert h.watcher is not None and h.tracker.watching
    h.stop()  # returns at once; the thread ends after its wait or with the process
    short = XidWatcher(replay.load(str(root / "nvml.json")), wait_ms=50)
    assert short.start()
    assert short.stop(timeout=STOP_GRACE)  # the loop ends after its current wait
    assert library(str(root)) is not None  # the fixture's recording
    oneshot = AgentHealth(
        config.load(env={}, flags={"root": str(root), "oneshot": True, "outputs": "hook"})
    )
    oneshot.after_scan(run_scan(root), "replay")
    assert oneshot.watcher is None  # one pass: nothing to watch between passes


def test_agent_with_xid_watcher_exits_on_sigterm_within_grace(tmp_path: Path) -> None:
    """The real agent, its watcher in a 30 s NVML event wait, ends on SIGTERM well within
    STOP_GRACE (the watcher is a daemon thread; nothing waits for its wait)."""
    args = [
        "--root", str(fixture_root("h100-xid-79")), "--features-dir", str(tmp_path),
        "--log-format", "json", "--no-udev", "--interval", "300",
    ]  # fmt: skip
    lines: list[str] = []
    with agent_process(args, agent_env()) as proc:
        assert proc.stderr is not None
        while not any("XID watcher: watching" in ln for ln in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        time.sleep(0.5)  # the watcher is in its event wait now
        err, took = sigterm(proc)
    assert proc.returncode == 0, err
    assert took < STOP_GRACE, f"SIGTERM took {took:.1f} s"
    assert any(json.loads(ln)["msg"].startswith("stopped after") for ln in err.splitlines() if ln)
