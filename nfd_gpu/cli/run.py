"""``nfd-gpu run``: the agent command.

Its options are the settings of :mod:`nfd_gpu.config.settings`.
:func:`nfd_gpu.cli.options.run_signature` builds its signature.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import typer

from nfd_gpu.cli.common import say
from nfd_gpu.cli.options import run_signature
from nfd_gpu.config.settings import CONFIG_ENV


def run_command(config: str | None = None, **flags: Any) -> None:
    """Scan and publish: once (--oneshot) or every --interval, on udev events and SIGHUP."""
    raise typer.Exit(code=main_run(config, flags))


# typer reads the options from the signature: --config, then one per setting with a flag
run_command.__dict__["__signature__"] = run_signature()


def _fail(msg: str) -> int:
    say(f"nfd-gpu: error: {msg}", err=True)
    return 2


def main_run(config_path: str | None, flags: dict[str, Any]) -> int:
    from nfd_gpu.agent import Agent, build_sinks, setup_logging  # lazy: as above
    from nfd_gpu.config import loader as config_mod  # lazy: YAML, label code: only when `run` runs
    from nfd_gpu.sinks import SinkError  # lazy: as above

    try:
        cfg = config_mod.load(config_path, flags=flags)
    except config_mod.ConfigError as e:
        return _fail(str(e))
    setup_logging(cfg.log_format, cfg.log_level)
    try:
        sinks = build_sinks(cfg)
    except SinkError as e:
        return _fail(str(e))
    metrics = None
    if cfg.metrics_address:
        from nfd_gpu.agent.metrics import Metrics  # lazy: prometheus_client, only with metrics

        metrics = Metrics()
    agent = Agent(
        cfg,
        sinks=sinks,
        reload=lambda: config_mod.load(config_path, flags=flags),
        metrics=metrics,
        config_file=config_path or os.environ.get(CONFIG_ENV) or None,
    )
    # What start-up made (the modules, the cluster client, the agent) lives as long as the
    # agent: out of every collection from now on, the first pass's included (each rule file
    # loaded runs a full one: nfd_gpu/rules/loader.py; 5 files: ~12% of the start-up's CPU).
    # The collector is on for the agent's life, whoever turned it off for the start-up
    # (nfd_gpu/entry.py).
    gc.freeze()
    gc.enable()
    try:
        return agent.run()
    except OSError as e:  # e.g. metrics address in use
        return _fail(f"{cfg.metrics_address}: {e.strerror or e}")
