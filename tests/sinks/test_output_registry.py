"""The output registry (``nfd_gpu/sinks/registry.py``): the ``outputs`` setting's choices,
the settings each output declares against what its sink really reads, the protocol the
outputs read a configuration through against ``Config``, and ``abort()`` on every sink."""

from __future__ import annotations

import dataclasses
import io
import typing
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent.outputs import build_sinks, sink_settings
from nfd_gpu.config import settings
from nfd_gpu.config.settings import Config
from nfd_gpu.sinks import OutputSettings, Publication, nodefeature
from nfd_gpu.sinks.registry import OUTPUTS, SETTINGS, chosen

PUB = Publication(labels={"gpu.feature.node.kubernetes.io/present": "true"})


class Reads:
    """A configuration that records which settings are read."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self.read: set[str] = set()

    def __getattr__(self, key: str) -> Any:
        self.read.add(key)
        return getattr(self._cfg, key)


def _cfg(tmp_path: Path, **kw: Any) -> Config:
    return Config(
        outputs=tuple(OUTPUTS),
        node_name="node-1",
        namespace="nfd-gpu",
        features_dir=str(tmp_path),
        **kw,
    )


def test_the_registry_is_the_settings_choices() -> None:
    assert settings.choices("outputs") == tuple(OUTPUTS) == ("featurefile", "nodefeature", "hook")
    assert all(name == o.name for name, o in OUTPUTS.items())
    assert [o.name for o in chosen(("hook", "bogus", "featurefile"))] == ["featurefile", "hook"]
    assert [n for n, o in OUTPUTS.items() if o.deprecated] == ["hook"]


def test_output_settings_are_configs_settings() -> None:
    """Each member of the protocol is a setting, with the setting's own type: the outputs
    read a Config through it (mypy checks a Config is one where the agent builds)."""
    members = {
        name: typing.get_type_hints(prop.fget)["return"]
        for name, prop in vars(OutputSettings).items()
        if isinstance(prop, property)
    }
    hints = typing.get_type_hints(Config)
    assert members and all(hints[k] == t for k, t in members.items()), members
    for output in OUTPUTS.values():
        assert set(output.settings) <= set(members), output.name
        assert set(output.settings) <= set(settings.FIELDS), output.name


def test_each_sink_reads_exactly_its_declared_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a sink is built from is what a reload compares (``sink_settings``): a setting
    read but not declared would be missed by a reload. Dry-run forms read no more."""
    monkeypatch.setattr(nodefeature, "build_api_client", lambda kubeconfig: None)
    for output in OUTPUTS.values():
        cfg = Reads(_cfg(tmp_path))
        sink = output.build(cfg)
        assert cfg.read == set(output.settings), output.name
        sink.abort()
        sink.close()
        dry = Reads(_cfg(tmp_path))
        out = io.StringIO()
        dry_sink = output.dry_run(dry, out)
        assert dry_sink.publish(PUB) is True and out.getvalue()
        assert dry.read <= set(output.settings), output.name
        dry_sink.abort()
        dry_sink.close()


def test_a_reload_rebuilds_the_sinks_when_an_outputs_setting_changes(tmp_path: Path) -> None:
    base = _cfg(tmp_path)
    changed = {
        "features_dir": "/elsewhere",
        "features_file": "other",
        "expiry": 7200.0,
        "raw_features": True,
        "remove_on_exit": True,
        "node_name": "node-2",
        "namespace": "other",
        "pod_name": "pod",
        "pod_uid": "uid",
        "owner_refs": ("pod",),
        "kubeconfig": "/kubeconfig",
        "api_timeout": 3.0,
        "resync_interval": 60.0,
    }
    assert set(changed) == set(SETTINGS)
    for key, value in changed.items():
        assert sink_settings(dataclasses.replace(base, **{key: value})) != sink_settings(base)
    for key, value in {"outputs": ("hook",), "dry_run": True}.items():
        assert sink_settings(dataclasses.replace(base, **{key: value})) != sink_settings(base)
    for key, value in {"interval": 5.0, "profiles": ("nvidia",), "udev": False}.items():
        assert sink_settings(dataclasses.replace(base, **{key: value})) == sink_settings(base)


def test_dry_run_sinks_follow_the_outputs_order(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, dry_run=True)
    sinks = build_sinks(dataclasses.replace(cfg, outputs=("hook", "nodefeature", "featurefile")))
    assert [s.name for s in sinks] == ["hook", "nodefeature", "featurefile"]
