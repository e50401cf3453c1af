"""A restart with a broken configuration keeps what the node carries (issue 34, finding 1).

The rules and the sharing config break while the agent runs (held: its last valid
versions), then the pod restarts (a rollout, ``helm upgrade``'s checksum roll, an
eviction): the new process has no valid version of them. Before: its first pass
published 7 changed labels (the rule label gone, ``gpu.product`` without ``-SHARED``,
replicas 4 -> 1) with ``/readyz`` 200. Now it publishes nothing: the feature file and the
NodeFeature (a recording sink stands for it: no request is sent) stay untouched,
``/readyz`` is 503 naming the file, so a rollout stops at ``maxUnavailable``; once the
file is valid again the next pass publishes and the agent is ready.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config import loader as config
from nfd_gpu.sinks import Publication, Sink
from tests.conftest import REPO, fixture_root
from tests.labels.nvidia_cases import SHARING

MIG_READY = "gpu.feature.node.kubernetes.io/mig-ready"
REPLICAS = "nvidia.com/gpu.replicas"


class Recorder(Sink):
    name = "recorder"

    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []

    def publish(self, pub: Publication) -> bool:
        self.published.append(dict(pub.labels))
        return True


def _start(tmp_path: Path, rules: Path, sharing: Path) -> tuple[Agent, Recorder, Metrics]:
    """A fresh agent process's state: the feature file and a recording sink."""
    cfg = config.load(
        env={},
        flags={
            "root": str(fixture_root("hgx-h100")),
            "outputs": "featurefile",
            "features_dir": str(tmp_path / "features.d"),
            "profiles": "nvidia",
            "rules": str(rules),
            "sharing_config": str(sharing),
        },
    )
    metrics, rec = Metrics(), Recorder()
    agent = Agent(cfg, metrics=metrics)
    agent.publisher.sinks.append(rec)
    return agent, rec, metrics


def _garbage(p: Path) -> Path:
    p.write_text("- [\n")
    return p


def _removed(p: Path) -> Path:
    shutil.rmtree(p)
    return p


BREAKS: dict[str, Callable[[Path, Path], Path]] = {
    "rules": lambda rules, _: _garbage(rules / "mig-ready.yaml"),
    "sharing config": lambda _, sharing: _garbage(sharing),
    "rule file deleted (the --rules path)": lambda rules, _: _removed(rules),
}


@pytest.mark.parametrize("what", list(BREAKS))
def test_restart_with_a_broken_file_publishes_nothing(
    tmp_path: Path, what: str, bounded: None
) -> None:
    rules = tmp_path / "rules.d"
    rules.mkdir()
    shutil.copy(REPO / "rules" / "mig-ready.yaml", rules)
    sharing = tmp_path / "sharing.yaml"
    shutil.copy(SHARING / "time-slicing-4.yaml", sharing)

    agent, rec, _ = _start(tmp_path, rules, sharing)
    assert agent.run_pass()
    good = rec.published[-1]
    assert good[MIG_READY] == "true" and good[REPLICAS] == "4"
    feature_file = tmp_path / "features.d" / "nfd-gpu"
    before = feature_file.read_bytes()
    stamp = feature_file.stat().st_mtime_ns

    broken = BREAKS[what](rules, sharing)
    assert not agent.run_pass() or rec.published[-1] == good  # held while it runs

    # the pod restarts: a new process, no valid version of the broken file
    agent, rec, metrics = _start(tmp_path, rules, sharing)
    for _ in range(3):
        assert not agent.run_pass()
    assert rec.published == []  # no request to the API server
    assert feature_file.read_bytes() == before
    assert feature_file.stat().st_mtime_ns == stamp
    code, body = metrics.readyz()
    assert code == 503 and str(broken).encode() in body, body
    assert b"no valid version" in body

    # repaired: published, ready
    if what == "rule file deleted (the --rules path)":
        rules.mkdir()
        shutil.copy(REPO / "rules" / "mig-ready.yaml", rules)
    elif what == "rules":
        shutil.copy(REPO / "rules" / "mig-ready.yaml", rules)
    else:
        shutil.copy(SHARING / "time-slicing-4.yaml", sharing)
    assert agent.run_pass()
    assert rec.published[-1][MIG_READY] == "true" and rec.published[-1][REPLICAS] == "4"
    assert metrics.readyz() == (200, b"ok\n")


def test_new_broken_rule_file_while_running_keeps_the_last_labels(
    tmp_path: Path, bounded: None
) -> None:
    """A file added broken (no valid version) while the agent runs: the last good labels
    are handed on again, not labels built without it; 503 until it is valid or removed."""
    rules = tmp_path / "rules.d"
    rules.mkdir()
    shutil.copy(REPO / "rules" / "mig-ready.yaml", rules)
    sharing = tmp_path / "sharing.yaml"
    shutil.copy(SHARING / "time-slicing-4.yaml", sharing)
    agent, rec, metrics = _start(tmp_path, rules, sharing)
    assert agent.run_pass()
    good = rec.published[-1]
    (rules / "new.yaml").write_text("- [\n")
    assert not agent.run_pass()
    assert rec.published[-1] == good
    assert metrics.readyz()[0] == 503
    (rules / "new.yaml").unlink()
    assert agent.run_pass()
    assert metrics.readyz() == (200, b"ok\n")
