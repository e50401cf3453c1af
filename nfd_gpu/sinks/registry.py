"""Every output, by name, in order.

- It is the one list that the ``outputs`` setting's choices, the agent's sinks,
  ``--dry-run``, the configuration checks and the start-up line read.
- A new output is one sink module with an ``OUTPUT``, a :class:`~nfd_gpu.sinks.Output`,
  and one line here.
- docs/architecture.md has the steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from nfd_gpu.sinks import Output, featurefile, hook, nodefeature

OUTPUTS: dict[str, Output] = {
    o.name: o
    for o in (
        featurefile.OUTPUT,
        nodefeature.OUTPUT,
        hook.OUTPUT,
    )
}

# every setting some output's sink is built from, once each, in order
SETTINGS: tuple[str, ...] = tuple(dict.fromkeys(k for o in OUTPUTS.values() for k in o.settings))


def chosen(names: Iterable[str]) -> list[Output]:
    """The registered outputs among ``names``, in the registry's order."""
    wanted = set(names)
    return [o for o in OUTPUTS.values() if o.name in wanted]
