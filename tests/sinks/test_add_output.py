"""The worked example of docs/architecture.md ("Worked example: adding an output"): an
output ``tofile`` that is one sink module's ``OUTPUT`` and one registry entry, run through
the configuration, the agent's sinks and ``--dry-run`` with no other change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import pytest

from nfd_gpu.agent.outputs import build_sinks, sink_settings
from nfd_gpu.config import loader as config
from nfd_gpu.config import settings
from nfd_gpu.sinks import Output, OutputSettings, Publication, Sink, registry
from nfd_gpu.sinks.dryrun import DryRunSink
from nfd_gpu.sinks.featurefile import render_body

PUB = Publication(labels={"gpu.feature.node.kubernetes.io/present": "true"})


class ToFileSink(Sink):
    name = "tofile"

    def __init__(self, directory: str, *, raw_features: bool = False) -> None:
        self.path = os.path.join(directory, "labels.txt")
        self.raw_features = raw_features

    def publish(self, pub: Publication) -> bool:
        Path(self.path).write_text(render_body(pub, raw=self.raw_features))
        return True


def _build(cfg: OutputSettings) -> ToFileSink:
    return ToFileSink(cfg.features_dir, raw_features=cfg.raw_features)


def _dry_run(cfg: OutputSettings, stream: TextIO | None) -> DryRunSink:
    return DryRunSink("tofile", lambda pub: render_body(pub, raw=cfg.raw_features), stream)


OUTPUT = Output("tofile", settings=("features_dir", "raw_features"), build=_build, dry_run=_dry_run)


@pytest.fixture
def tofile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registry line: ``tofile.OUTPUT`` in ``OUTPUTS``."""
    monkeypatch.setitem(registry.OUTPUTS, OUTPUT.name, OUTPUT)


@pytest.mark.usefixtures("tofile")
def test_a_new_output_is_one_entry(tmp_path: Path) -> None:
    assert "tofile" in settings.choices("outputs")
    cfg = config.load(env={}, flags={"outputs": "tofile", "features_dir": str(tmp_path)})
    (sink,) = build_sinks(cfg)
    assert sink.publish(PUB) is True
    assert (tmp_path / "labels.txt").read_text() == "gpu.feature.node.kubernetes.io/present=true\n"
    assert sink_settings(cfg) != sink_settings(config.load(env={}, flags={"outputs": "tofile"}))


@pytest.mark.usefixtures("tofile")
def test_its_dry_run_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = {"outputs": "tofile", "features_dir": str(tmp_path), "dry_run": True}
    (sink,) = build_sinks(config.load(env={}, flags=flags))
    assert sink.publish(PUB) is True and sink.publish(PUB) is False  # printed once
    assert capsys.readouterr().out == "gpu.feature.node.kubernetes.io/present=true\n"
    assert not (tmp_path / "labels.txt").exists()


def test_without_the_entry_it_is_refused() -> None:
    with pytest.raises(config.ConfigError, match="outputs: unknown value 'tofile'"):
        config.load(env={}, flags={"outputs": "tofile"})
