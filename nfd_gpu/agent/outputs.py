"""The sinks a configuration asks for: one per chosen output of ``sinks/registry.py``."""

from __future__ import annotations

import hashlib
from typing import Any

from nfd_gpu.config.loader import Config
from nfd_gpu.host import boundedfile
from nfd_gpu.sinks import Sink
from nfd_gpu.sinks.registry import OUTPUTS, SETTINGS


def sink_settings(cfg: Config) -> tuple[Any, ...]:
    """The settings that shape the sinks.

    - They are the outputs, every output's own settings, the dry run, the kubeconfig's
      contents.
    - A reload rebuilds the sinks only when these change.
    - So credentials rotated in place, at the same path, are picked up on SIGHUP.
    """
    return (
        cfg.outputs,
        *(getattr(cfg, key) for key in SETTINGS),
        cfg.dry_run,
        _digest(cfg.kubeconfig),
    )


def _digest(path: str | None) -> str | None:
    """A fingerprint of the file's contents; None for no file or an unreadable one."""
    if not path:
        return None
    try:
        return hashlib.sha256(boundedfile.read(path)).hexdigest()
    except OSError:
        return None


def build_sinks(cfg: Config) -> list[Sink]:
    """The configured sinks; raises SinkError for an unusable Kubernetes configuration."""
    if cfg.dry_run:
        return [OUTPUTS[out].dry_run(cfg, None) for out in cfg.outputs]
    return [OUTPUTS[out].build(cfg) for out in cfg.outputs]
