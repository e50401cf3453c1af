"""``--dry-run``: each output prints what it would write, to stdout, and writes nothing.

* ``nodefeature``: the NodeFeature object as YAML (a ``---`` document per change), built by
  :meth:`NodeFeatureSink.desired` with no API client: no kubeconfig or cluster is needed.
  ``ownerReferences`` are left empty (resolving the DaemonSet's uid needs the API).
* ``featurefile``: the file's content, after a ``# would write <path>`` comment line.
* ``hook``: its usual stdout.

As with the hook output, a pass prints only when the result changed; logs go to stderr.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

import yaml

from nfd_gpu.config import Config
from nfd_gpu.sinks import Publication, Sink, featurefile
from nfd_gpu.sinks.hook import HookSink
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from nfd_gpu.sinks.stdout import ChangedText


class DryRunSink:
    """Prints ``render(pub)`` instead of publishing."""

    def __init__(
        self, name: str, render: Callable[[Publication], str], stream: TextIO | None = None
    ) -> None:
        self.name = name
        self.render = render
        self._out = ChangedText("dry-run", stream)

    def publish(self, pub: Publication) -> bool:
        return self._out.write(self.render(pub))

    def close(self) -> None:
        return None


def nodefeature_yaml(node_name: str, namespace: str) -> Callable[[Publication], str]:
    sink = NodeFeatureSink(node_name=node_name, namespace=namespace, owner_refs=())

    def render(pub: Publication) -> str:
        return "---\n" + yaml.safe_dump(sink.desired(pub), sort_keys=False)

    return render


def dry_run_sinks(cfg: Config, stream: TextIO | None = None) -> list[Sink]:
    sinks: list[Sink] = []
    for out in cfg.outputs:
        if out == "nodefeature":
            assert cfg.node_name and cfg.namespace  # config fills them for a dry run
            render = nodefeature_yaml(cfg.node_name, cfg.namespace)
            sinks.append(DryRunSink(out, render, stream))
        elif out == "featurefile":
            path = f"{cfg.features_dir.rstrip('/')}/{cfg.features_file}"

            def render_file(pub: Publication, path: str = path) -> str:
                body = featurefile.render(
                    pub, expires_at=time.time() + cfg.expiry, raw=cfg.raw_features
                )
                return f"# would write {path}\n{body}"

            sinks.append(DryRunSink(out, render_file, stream))
        elif out == "hook":
            sinks.append(HookSink(stream, raw_features=cfg.raw_features))
    return sinks
