"""Last valid configuration wins: rule files, the sharing config and the configuration file.

The real agent (real scan of a fixture, real rule loader, real sharing-config and
configuration loaders) publishes to a recording sink. A file that breaks mid-run
(garbage, truncated YAML, an empty file, deleted, a directory or FIFO in its place, 5 MiB
or a sparse 1 GB file, one invalid label, a bad version) must leave the published labels
byte-identical, give exactly one warning naming the file however many passes follow,
set ``nfd_gpu_config_stale{file}`` and put the reason into ``/readyz``'s 200 body. A valid
change (a rule removed, a file removed, an empty rule directory) is honoured and logged.
Before: the next pass published the labels minus that file's (rules), or without
``-SHARED`` and with 1 replica (sharing config), and said nothing for some cases.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config import loader as config
from nfd_gpu.sinks import Publication, Sink
from tests.conftest import REPO, fixture_root
from tests.labels.nvidia_cases import SHARING

NV = "nvidia.com"
CLASS = "gpu.feature.node.kubernetes.io/class"
MIG_READY = "gpu.feature.node.kubernetes.io/mig-ready"
PASSES = 4  # passes after the breakage: still one warning


class Recorder(Sink):
    name = "recorder"

    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []

    def publish(self, pub: Publication) -> bool:
        self.published.append(dict(pub.labels))
        return True


def _agent(tmp_path: Path, **flags: Any) -> tuple[Agent, Recorder, Metrics]:
    cfg = config.load(
        env={}, flags={"root": str(fixture_root("hgx-h100")), "outputs": "hook", **flags}
    )
    rec, metrics = Recorder(), Metrics()
    return Agent(cfg, sinks=[rec], metrics=metrics), rec, metrics


def _stale(metrics: Metrics, file: str) -> float:
    return float(metrics.config_stale.labels(file=file)._value.get())


def _warnings(caplog: pytest.LogCaptureFixture, file: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and file in r.getMessage()
    ]


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _directory(p: Path) -> None:
    p.unlink()
    p.mkdir()


def _sparse(size: int) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        with p.open("wb") as f:
            f.truncate(size)

    return make


def _invalid_label(p: Path) -> None:
    p.write_text(p.read_text().replace("gpu.feature.node.kubernetes.io/mig-ready", "bad label!"))


BREAKS: dict[str, Callable[[Path], None]] = {
    "garbage": lambda p: p.write_bytes(b"\x00\xff{{{: [garbage\n"),
    "truncated YAML": lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2 - 7]),
    "empty file": lambda p: p.write_text(""),
    "deleted": lambda p: p.unlink(),
    "replaced by a directory": _directory,
    "replaced by a FIFO": _fifo,
    "over 4 MiB": _sparse(5 << 20),
    "1 GB": _sparse(1 << 30),
    "one invalid label": _invalid_label,
}


def _rules(tmp_path: Path, single: bool) -> tuple[Path, Path]:
    """(the --rules path, the mig-ready file) with the shipped gpu-class and mig-ready rules."""
    d = tmp_path / "rules.d"
    d.mkdir()
    shutil.copy(REPO / "rules" / "gpu-class.yaml", d)
    shutil.copy(REPO / "rules" / "mig-ready.yaml", d)
    f = d / "mig-ready.yaml"
    return (f if single else d), f


# (how, single): every break of the --rules file, and of a file in the --rules directory
# but its removal, which is a valid change there (test below)
RULE_BREAKS = [
    pytest.param(how, single, id=f"{how}-{'file' if single else 'directory'}")
    for how in BREAKS
    for single in (False, True)
    if single or how != "deleted"
]


@pytest.mark.parametrize(("how", "single"), RULE_BREAKS)
def test_broken_rule_file_keeps_its_labels(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, single: bool, bounded: None
) -> None:
    rules, f = _rules(tmp_path, single)
    agent, rec, metrics = _agent(tmp_path, rules=str(rules))
    assert agent.run_pass()
    good = rec.published[-1]
    assert good[MIG_READY] == "true" and (single or good[CLASS] == "large")
    caplog.set_level(logging.INFO)
    BREAKS[how](f)
    for _ in range(PASSES):
        agent.run_pass()
        assert rec.published[-1] == good  # byte-identical, every pass
    stale_file = str(rules) if how == "deleted" else str(f)
    warned = _warnings(caplog, stale_file)
    assert len(warned) == 1, warned
    assert "keeping its last valid version" in warned[0]
    assert _stale(metrics, stale_file) == 1
    code, body = metrics.readyz()
    assert code == 200 and stale_file.encode() in body, body
    # repaired: valid again, the metric back to 0, labels as before
    if f.is_dir():
        f.rmdir()
    elif f.exists() or f.is_fifo():
        f.unlink()
    shutil.copy(REPO / "rules" / "mig-ready.yaml", f)
    agent.run_pass()
    assert rec.published[-1] == good
    assert _stale(metrics, stale_file) == 0
    assert metrics.readyz() == (200, b"ok\n")


def test_valid_rule_changes_are_honoured_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rules, f = _rules(tmp_path, single=False)
    agent, rec, metrics = _agent(tmp_path, rules=str(rules))
    agent.run_pass()
    assert rec.published[-1][MIG_READY] == "true"
    caplog.set_level(logging.INFO)
    # a rule removed from a file
    text = f.read_text()
    f.write_text(text[: text.index("    - name: mig-active")])
    agent.run_pass()
    assert rec.published[-1][MIG_READY] == "true"
    assert any("changed: 1 rules" in m and "mig-active" in m for m in caplog.messages)
    # the whole rule dropped: its label goes
    f.write_text(text.replace(MIG_READY, "gpu.feature.node.kubernetes.io/mig-ok"))
    agent.run_pass()
    assert MIG_READY not in rec.published[-1]
    # a file removed from the directory: its rules no longer apply
    f.unlink()
    agent.run_pass()
    assert "gpu.feature.node.kubernetes.io/mig-ok" not in rec.published[-1]
    assert rec.published[-1][CLASS] == "large"
    assert any("mig-ready.yaml removed" in m for m in caplog.messages)
    # an empty rule directory: no rule labels at all
    (rules / "gpu-class.yaml").unlink()
    agent.run_pass()
    assert CLASS not in rec.published[-1]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert metrics.readyz() == (200, b"ok\n")


SHARING_BREAKS: dict[str, Callable[[Path], None]] = {
    "garbage": lambda p: p.write_text("sharing: [\n"),
    "bad version": lambda p: p.write_text(p.read_text().replace("version: v1", "version: v9")),
    "deleted": lambda p: p.unlink(),
    "replaced by a directory": _directory,
    # opening a FIFO blocked for ever before the bounded reader
    "replaced by a FIFO": _fifo,
}


@pytest.mark.parametrize("how", list(SHARING_BREAKS))
def test_broken_sharing_config_keeps_the_labels(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, bounded: None
) -> None:
    f = tmp_path / "sharing.yaml"
    shutil.copy(SHARING / "time-slicing-4.yaml", f)
    assert "version: v1" in f.read_text()
    agent, rec, metrics = _agent(tmp_path, profiles="nvidia", sharing_config=str(f))
    agent.run_pass()
    good = rec.published[-1]
    assert good[f"{NV}/gpu.replicas"] == "4" and good[f"{NV}/gpu.product"].endswith("-SHARED")
    caplog.set_level(logging.INFO)
    SHARING_BREAKS[how](f)
    for _ in range(PASSES):
        agent.run_pass()
        assert rec.published[-1] == good
    warned = _warnings(caplog, str(f))
    assert len(warned) == 1, warned
    assert _stale(metrics, str(f)) == 1
    assert str(f).encode() in metrics.readyz()[1]


def test_sharing_config_valid_change_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "sharing.yaml"
    shutil.copy(SHARING / "time-slicing-4.yaml", f)
    agent, rec, _ = _agent(tmp_path, profiles="nvidia", sharing_config=str(f))
    agent.run_pass()
    caplog.set_level(logging.INFO)
    f.write_text(f.read_text().replace("replicas: 4", "replicas: 2"))
    agent.run_pass()
    assert rec.published[-1][f"{NV}/gpu.replicas"] == "2"
    assert any("sharing config" in m and "replicas" in m for m in caplog.messages)


CONFIG_BREAKS: dict[str, Callable[[Path], None]] = {
    "garbage": lambda p: p.write_bytes(b"\xff\xfe garbage"),
    "truncated YAML": lambda p: p.write_text("interval: [30\n"),
    "invalid value": lambda p: p.write_text("interval: soon\n"),
    # a health threshold the agent cannot use: not all four reset to their defaults
    "invalid health value": lambda p: p.write_text("interval: 30\nhealth_hold_passes: 2.5\n"),
    "deleted": lambda p: p.unlink(),
    "replaced by a directory": _directory,
    "replaced by a FIFO": _fifo,  # as for the sharing config: must not block
}


@pytest.mark.parametrize("how", list(CONFIG_BREAKS))
def test_broken_config_file_on_reload_keeps_the_configuration(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    bounded: None,
) -> None:
    # a reload reconfigures logging (which would take pytest's capture away)
    monkeypatch.setattr("nfd_gpu.agent.loop.setup_logging", lambda *_: None)
    cf = tmp_path / "config.yaml"
    cf.write_text("interval: 30\nprofiles: [nvidia]\n")
    flags = {"root": str(fixture_root("hgx-h100")), "outputs": "hook"}
    cfg = config.load(str(cf), env={}, flags=flags)
    rec, metrics = Recorder(), Metrics()
    agent = Agent(
        cfg,
        sinks=[rec],
        metrics=metrics,
        reload=lambda: config.load(str(cf), env={}, flags=flags),
        config_file=str(cf),
    )
    agent.run_pass()
    good = rec.published[-1]
    caplog.set_level(logging.INFO)
    CONFIG_BREAKS[how](cf)
    for _ in range(3):  # three SIGHUPs with the same broken file: one warning
        agent.request_reload()
        agent._reload()
        agent.run_pass()
        assert rec.published[-1] == good
    assert agent.cfg is cfg
    assert len(_warnings(caplog, str(cf))) == 1, caplog.messages
    assert _stale(metrics, str(cf)) == 1
    assert str(cf).encode() in metrics.readyz()[1]
    # a valid file again: reloaded, and what changed is logged
    if cf.is_dir():
        cf.rmdir()
    elif cf.is_fifo():
        cf.unlink()
    cf.write_text("interval: 45\nprofiles: [nvidia]\n")
    agent._reload()
    assert agent.cfg.interval == 45
    assert _stale(metrics, str(cf)) == 0
    assert any("interval: 30.0 -> 45.0" in m for m in caplog.messages), caplog.messages


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthz(port: int) -> int | None:
    """/healthz's status on this port, None when nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def test_reload_applies_metrics_address_and_liveness(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SIGHUP that changes ``metrics_address`` moves the server there; one that changes
    ``interval`` moves /healthz's timeout with it (five intervals): a pod whose config file
    says ``interval: 3600`` is not restarted by its liveness probe between passes. An
    address that cannot be bound keeps the server where it was, said in one line."""
    monkeypatch.setattr("nfd_gpu.agent.loop.setup_logging", lambda *_: None)
    first, second = _free_port(), _free_port()
    cf = tmp_path / "config.yaml"
    cf.write_text(f"interval: 30\nmetrics_address: 127.0.0.1:{first}\n")
    flags = {"root": str(fixture_root("hgx-h100")), "outputs": "hook"}
    cfg = config.load(str(cf), env={}, flags=flags)
    agent = Agent(
        cfg,
        sinks=[Recorder()],
        metrics=Metrics(),
        reload=lambda: config.load(str(cf), env={}, flags=flags),
        config_file=str(cf),
    )
    agent.start_metrics()
    try:
        agent.run_pass()
        assert _healthz(first) == 200
        cf.write_text(f"interval: 3600\nmetrics_address: 127.0.0.1:{second}\n")
        agent._reload()
        assert _healthz(first) is None and _healthz(second) == 200
        assert agent.metrics is not None and agent.metrics.liveness_timeout == 5 * 3600
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            cf.write_text(f"interval: 3600\nmetrics_address: 127.0.0.1:{busy}\n")
            caplog.set_level(logging.INFO)
            agent._reload()
            assert _healthz(second) == 200
            assert agent.cfg.metrics_address == f"127.0.0.1:{second}"  # retried next reload
            errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
            assert len(errors) == 1 and f"cannot listen on 127.0.0.1:{busy}" in errors[0]
    finally:
        if agent.metrics_server is not None:
            agent.metrics_server.stop()
