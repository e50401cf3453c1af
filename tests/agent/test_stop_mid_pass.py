"""SIGTERM in the middle of a pass: a scan is cut off at once, a write is finished first.

The agent runs in the test's main thread, where it installs its handlers; the signal is
raised from inside the scan, or from inside the sink's write, as a pod's deletion lands
while the first pass runs (tests/node/test_pod_lifecycle.py on a real kubelet).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.config.loader import Config
from nfd_gpu.scan import run_scan
from nfd_gpu.sinks import Publication, Sink
from tests.conftest import fixture_root


class Recorder(Sink):
    name = "recorder"

    def __init__(self, signal_in_write: bool = False) -> None:
        self.signal_in_write = signal_in_write
        self.written: list[int] = []

    def publish(self, pub: Publication) -> bool:
        if self.signal_in_write:
            signal.raise_signal(signal.SIGTERM)
        self.written.append(len(pub.labels))  # the write goes on to its end
        return True


@pytest.fixture(autouse=True)
def _handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _cfg(tmp_path: Path, **kw: Any) -> Config:
    return Config(
        root=str(fixture_root("hgx-h100")),
        outputs=("featurefile",),
        features_dir=str(tmp_path),
        udev=False,
        interval=300,
        **kw,
    )


@pytest.mark.parametrize("oneshot", [False, True])
def test_sigterm_during_the_scan_ends_the_pass_at_once(tmp_path: Path, oneshot: bool) -> None:
    after: list[str] = []

    def scan(root: str, **kw: Any) -> Any:
        signal.raise_signal(signal.SIGTERM)
        after.append("the scan went on")  # the handler runs before this line
        return run_scan(root, **kw)

    sink = Recorder()
    agent = Agent(_cfg(tmp_path, oneshot=oneshot), scan=scan, sinks=[sink])
    code = agent.run()
    assert after == [] and sink.written == []
    assert code == (1 if oneshot else 0)  # oneshot: 0 only once published


def test_sigterm_during_a_write_lets_it_finish_then_stops(tmp_path: Path) -> None:
    sink = Recorder(signal_in_write=True)
    agent = Agent(_cfg(tmp_path), sinks=[sink])
    assert agent.run() == 0  # not oneshot: without the signal it would loop for ever
    assert len(sink.written) == 1 and sink.written[0] > 0
    assert agent.passes == 1
