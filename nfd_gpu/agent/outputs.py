"""The sinks a configuration asks for."""

from __future__ import annotations

from typing import Any

from nfd_gpu.config import Config
from nfd_gpu.sinks import Sink
from nfd_gpu.sinks.dryrun import dry_run_sinks
from nfd_gpu.sinks.featurefile import FeatureFileSink
from nfd_gpu.sinks.hook import HookSink
from nfd_gpu.sinks.nodefeature import NodeFeatureSink, build_api_client


def sink_settings(cfg: Config) -> tuple[Any, ...]:
    """The settings that shape the sinks: a reload rebuilds them only when these change."""
    return (
        cfg.outputs,
        cfg.features_dir,
        cfg.features_file,
        cfg.expiry,
        cfg.raw_features,
        cfg.remove_on_exit,
        cfg.node_name,
        cfg.namespace,
        cfg.pod_name,
        cfg.pod_uid,
        cfg.owner_refs,
        cfg.kubeconfig,
        cfg.api_timeout,
        cfg.resync_interval,
        cfg.dry_run,
    )


def build_sinks(cfg: Config) -> list[Sink]:
    """The configured sinks; raises SinkError for an unusable Kubernetes configuration."""
    if cfg.dry_run:
        return dry_run_sinks(cfg)
    sinks: list[Sink] = []
    for out in cfg.outputs:
        if out == "featurefile":
            sinks.append(
                FeatureFileSink(
                    cfg.features_dir,
                    cfg.features_file,
                    expiry=cfg.expiry,
                    raw_features=cfg.raw_features,
                    remove_on_exit=cfg.remove_on_exit,
                )
            )
        elif out == "hook":
            sinks.append(HookSink(raw_features=cfg.raw_features))
        elif out == "nodefeature":
            assert cfg.node_name and cfg.namespace  # checked by config validation
            sinks.append(
                NodeFeatureSink(
                    node_name=cfg.node_name,
                    namespace=cfg.namespace,
                    api_client=build_api_client(cfg.kubeconfig),
                    owner_refs=cfg.owner_refs,
                    pod_name=cfg.pod_name,
                    pod_uid=cfg.pod_uid,
                    timeout=cfg.api_timeout,
                    resync_interval=cfg.resync_interval,
                )
            )
    return sinks
