"""``nfd-gpu run``: the agent command. ``register(app)`` adds it to the main typer app.

``python -m nfd_gpu.run_cli ...`` runs the same command standalone (used by the tests).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer

from nfd_gpu import config as config_mod

log = logging.getLogger(__name__)

Opt = typer.Option


def run_command(
    config: Annotated[
        str | None, Opt("--config", "-c", help="YAML config file (env NFD_GPU_CONFIG)")
    ] = None,
    interval: Annotated[float | None, Opt(help="Seconds between passes (default 60)")] = None,
    oneshot: Annotated[
        bool | None, Opt("--oneshot/--no-oneshot", help="One pass, publish, exit")
    ] = None,
    output: Annotated[
        list[str] | None,
        Opt(
            "--output",
            "-o",
            help="featurefile, nodefeature, hook; repeat or comma-separate (default featurefile)",
        ),
    ] = None,
    root: Annotated[str | None, Opt(help="Host root to scan (default /)")] = None,
    profile: Annotated[
        list[str] | None, Opt("--profile", help="Label profile(s) (default neutral)")
    ] = None,
    profile_option: Annotated[
        list[str] | None,
        Opt("--profile-option", help="Opt-in label group of a profile (repeatable): amd-beta, ..."),
    ] = None,
    mig_strategy: Annotated[
        str | None, Opt(help="nvidia profile MIG strategy: none (default), single, mixed, auto")
    ] = None,
    sharing_config: Annotated[
        str | None, Opt(help="Device-plugin sharing config file (nvidia profile)")
    ] = None,
    gfd_timestamp: Annotated[
        bool | None,
        Opt(
            "--gfd-timestamp/--no-gfd-timestamp",
            help="nvidia profile: emit gfd.timestamp, fixed at agent start (default off)",
        ),
    ] = None,
    nvml: Annotated[
        str | None,
        Opt(help="NVML: auto (recording, else library, else procfs; default), on, off"),
    ] = None,
    rules: Annotated[str | None, Opt(help="NodeFeatureRule file or directory")] = None,
    features_dir: Annotated[str | None, Opt(help="Feature-file directory")] = None,
    features_file: Annotated[str | None, Opt(help="Feature-file name (default nfd-gpu)")] = None,
    expiry: Annotated[
        float | None, Opt(help="Feature-file expiry in seconds (default 3600)")
    ] = None,
    raw_features: Annotated[
        bool | None,
        Opt("--raw-features/--no-raw-features", help="Write raw features as '# +no-label'"),
    ] = None,
    remove_on_exit: Annotated[
        bool | None,
        Opt("--remove-on-exit/--keep-on-exit", help="Remove the feature file on exit"),
    ] = None,
    node_name: Annotated[str | None, Opt(help="Node name (env NODE_NAME)")] = None,
    namespace: Annotated[str | None, Opt(help="NodeFeature namespace (env POD_NAMESPACE)")] = None,
    owner_refs: Annotated[
        str | None, Opt(help="Owner references: 'pod,ds' (default), '' for none")
    ] = None,
    kubeconfig: Annotated[str | None, Opt(help="kubeconfig (default: in-cluster)")] = None,
    api_timeout: Annotated[
        float | None, Opt(help="API request timeout seconds (default 10)")
    ] = None,
    resync_interval: Annotated[
        float | None, Opt(help="NodeFeature resync GET period seconds (default 3600)")
    ] = None,
    metrics_address: Annotated[
        str | None, Opt(help="host:port for /metrics /healthz /readyz (default: off)")
    ] = None,
    log_format: Annotated[str | None, Opt(help="text or json (default text)")] = None,
    log_level: Annotated[str | None, Opt(help="debug, info, warning, error (default info)")] = None,
    udev: Annotated[
        bool | None, Opt("--udev/--no-udev", help="Rescan on pci/drm udev events (default on)")
    ] = None,
    udev_debounce: Annotated[
        float | None, Opt(help="Quiet seconds after a udev event (default 2)")
    ] = None,
    dry_run: Annotated[
        bool | None,
        Opt(
            "--dry-run/--no-dry-run",
            help="Print what each output would write (NodeFeature YAML, feature file) to "
            "stdout instead of writing; no cluster needed (node name: --node-name, NODE_NAME "
            "or the host name)",
        ),
    ] = None,
) -> None:
    """Scan and publish: once (--oneshot) or every --interval, on udev events and SIGHUP."""
    flags: dict[str, Any] = {
        "interval": interval,
        "oneshot": oneshot,
        "outputs": output,
        "root": root,
        "profiles": profile,
        "profile_options": profile_option,
        "mig_strategy": mig_strategy,
        "sharing_config": sharing_config,
        "gfd_timestamp": gfd_timestamp,
        "nvml": nvml,
        "rules": rules,
        "features_dir": features_dir,
        "features_file": features_file,
        "expiry": expiry,
        "raw_features": raw_features,
        "remove_on_exit": remove_on_exit,
        "node_name": node_name,
        "namespace": namespace,
        "owner_refs": owner_refs,
        "kubeconfig": kubeconfig,
        "api_timeout": api_timeout,
        "resync_interval": resync_interval,
        "metrics_address": metrics_address,
        "log_format": log_format,
        "log_level": log_level,
        "udev": udev,
        "udev_debounce": udev_debounce,
        "dry_run": dry_run,
    }
    raise typer.Exit(code=main_run(config, flags))


def _fail(msg: str) -> int:
    print(f"nfd-gpu: error: {msg}", file=sys.stderr)
    return 2


def main_run(config_path: str | None, flags: dict[str, Any]) -> int:
    from nfd_gpu.agent import Agent, build_sinks, setup_logging
    from nfd_gpu.sinks import SinkError

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
        from nfd_gpu.metrics import Metrics

        metrics = Metrics()
    agent = Agent(
        cfg,
        sinks=sinks,
        reload=lambda: config_mod.load(config_path, flags=flags),
        metrics=metrics,
    )
    try:
        return agent.run()
    except OSError as e:  # e.g. metrics address in use
        return _fail(f"{cfg.metrics_address}: {e.strerror or e}")


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the main app."""
    app.command("run")(run_command)


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)

    @app.callback()
    def _root() -> None:
        """nfd-gpu agent (standalone entry for tests)."""

    app()


if __name__ == "__main__":
    main()
