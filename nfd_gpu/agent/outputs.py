"""The sinks a configuration asks for: one per chosen output (``sinks/registry.py``)."""

from __future__ import annotations

from typing import Any

from nfd_gpu.config import Config
from nfd_gpu.sinks import Sink
from nfd_gpu.sinks.registry import OUTPUTS, SETTINGS


def sink_settings(cfg: Config) -> tuple[Any, ...]:
    """The settings that shape the sinks (the outputs, every output's own settings, the dry
    run): a reload rebuilds them only when these change."""
    return (cfg.outputs, *(getattr(cfg, key) for key in SETTINGS), cfg.dry_run)


def build_sinks(cfg: Config) -> list[Sink]:
    """The configured sinks; raises SinkError for an unusable Kubernetes configuration."""
    if cfg.dry_run:
        return [OUTPUTS[out].dry_run(cfg, None) for out in cfg.outputs]
    return [OUTPUTS[out].build(cfg) for out in cfg.outputs]
