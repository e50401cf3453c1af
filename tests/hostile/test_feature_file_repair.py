"""The feature file is the agent's: removed,
edited (a foreign label, a changed value) or replaced by a link behind the agent's back,
it is restored on the next pass, atomically, with one warning naming what differed and
``nfd_gpu_repairs_total{output="featurefile"}`` counting it. Before: an edit that kept
size and mtime, or any edit before the next content change, stayed until the expiry
refresh (half the expiry: 30 min by default).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config.loader import Config
from nfd_gpu.sinks.featurefile import FeatureFileSink
from tests.sinks.nfd_local_parser import parse_features_dir

from .test_api_faults import FakeResult

LABELS = {"gpu.feature.node.kubernetes.io/present": "true", "nvidia.com/gpu.count": "8"}


def _edit_value(p: Path) -> None:
    st = os.stat(p)
    text = p.read_text().replace("gpu.count=8", "gpu.count=9")
    p.write_text(text)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime


def _foreign(p: Path) -> None:
    with p.open("a") as f:
        f.write("gpu.feature.node.kubernetes.io/evil=1\n")


def _link(p: Path) -> None:
    other = p.parent.parent / "elsewhere"
    other.write_text("gpu.feature.node.kubernetes.io/evil=1\n")
    p.unlink()
    p.symlink_to(other)


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


TAMPER: dict[str, tuple[Callable[[Path], None], str]] = {
    "removed": (lambda p: p.unlink(), "removed"),
    "value edited, size and mtime kept": (_edit_value, "gpu.count=9"),
    "foreign label appended": (_foreign, "+gpu.feature.node.kubernetes.io/evil=1"),
    "replaced by a link": (_link, "a symbolic link, not followed"),
    # read back through the one bounded reader: never blocks, never reads past NFD's cap
    "replaced by a FIFO": (_fifo, "not a regular file (a FIFO)"),
    "grown past NFD's 65,536 bytes": (
        lambda p: p.write_bytes(p.read_bytes() + b"#" * 65536),
        "larger than the 65536 allowed",
    ),
}


@pytest.mark.parametrize("how", list(TAMPER))
def test_feature_file_is_restored_on_the_next_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, bounded: None
) -> None:
    fd = tmp_path / "features.d"
    sink = FeatureFileSink(str(fd), expiry=3600)
    cfg = Config(interval=60, outputs=("featurefile",), udev=False)
    metrics = Metrics()
    agent = Agent(
        cfg, scan=lambda *_, **__: FakeResult(dict(LABELS)), sinks=[sink], metrics=metrics
    )
    assert agent.run_pass()
    path = fd / "nfd-gpu"
    written = path.read_bytes()
    assert agent.run_pass()  # unchanged: nothing written
    caplog.set_level(logging.INFO)
    tamper, differs = TAMPER[how]
    tamper(path)
    assert agent.run_pass()
    assert not path.is_symlink()
    assert parse_features_dir(str(fd), dt.datetime.now(dt.timezone.utc))[0] == LABELS
    assert path.read_bytes().split(b"\n", 2)[2] == written.split(b"\n", 2)[2]  # after expiry
    warned = [m for m in caplog.messages if "restored what was changed" in m]
    assert len(warned) == 1 and differs in warned[0], caplog.messages
    assert metrics.repairs.labels(output="featurefile")._value.get() == 1
    agent.run_pass()  # repaired: the next pass finds it ours again
    assert metrics.repairs.labels(output="featurefile")._value.get() == 1
    assert [m for m in caplog.messages if "restored what was changed" in m] == warned
