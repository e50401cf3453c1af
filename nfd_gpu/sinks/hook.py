"""Hook sink: ``key=value`` lines on stdout, NFD's local-hook format.

- NFD ran hooks from ``source.d/`` until v0.17, in NFD's ``source/local``.
- The same output also serves as a feature file body for a wrapper script.
- Lines are sorted.
- Logs go to stderr, so stdout carries nothing else.
- In a loop the set is printed again only when it changed, followed by an empty line as
  a separator.
"""

from __future__ import annotations

from typing import TextIO

from nfd_gpu.sinks import Output, OutputSettings, Publication, Sink
from nfd_gpu.sinks.featurefile import render_body
from nfd_gpu.sinks.stdout import ChangedText


class HookSink(Sink):
    name = "hook"

    def __init__(self, stream: TextIO | None = None, *, raw_features: bool = False) -> None:
        self.raw_features = raw_features
        self._out = ChangedText("hook", stream, separator="\n")

    def publish(self, pub: Publication) -> bool:
        return self._out.write(render_body(pub, raw=self.raw_features))


def _build(cfg: OutputSettings, stream: TextIO | None = None) -> HookSink:
    return HookSink(stream, raw_features=cfg.raw_features)


OUTPUT = Output(
    "hook",
    settings=("raw_features",),
    build=_build,
    dry_run=_build,  # it prints already
    deprecated="NFD v0.17 stopped running hooks, nothing reads it (use featurefile, or "
    "`nfd-gpu scan` for key=value lines)",
)
