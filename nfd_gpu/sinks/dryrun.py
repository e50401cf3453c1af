"""``--dry-run``: each output prints what it would write, to stdout, and writes nothing.

Each :class:`~nfd_gpu.sinks.Output` gives its ``dry_run`` form:

* ``nodefeature``: the NodeFeature object as YAML, a ``---`` document per change.
  :meth:`NodeFeatureSink.desired` builds it with no API client, so no kubeconfig or
  cluster is needed. ``ownerReferences`` are left empty: resolving the DaemonSet's uid
  needs the API.
* ``featurefile``: the sink itself in its dry-run mode. It prints the file's content after
  a ``# would write <path>`` comment line, on the passes where it would write: a change,
  an expiry refresh. Its size rules hold: raw features dropped, oversized labels refused.
* ``hook``: its usual stdout.

As with the hook output, a pass prints only when the result changed; logs go to stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from nfd_gpu.sinks import Publication, Sink
from nfd_gpu.sinks.stdout import ChangedText


class DryRunSink(Sink):
    """Prints ``render(pub)`` instead of publishing."""

    def __init__(
        self, name: str, render: Callable[[Publication], str], stream: TextIO | None = None
    ) -> None:
        self.name = name
        self.render = render
        self._out = ChangedText("dry-run", stream)

    def publish(self, pub: Publication) -> bool:
        return self._out.write(self.render(pub))
