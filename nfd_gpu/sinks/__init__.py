"""Publishing sinks: where a scan result goes.

Each sink takes a :class:`Publication` (labels + raw features) and either writes it,
finds it unchanged, or raises :class:`SinkError`. A failed write never damages what
was published before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from nfd_gpu.features import Features, empty


class SinkError(Exception):
    """Publishing failed. ``transient`` errors (5xx, timeouts) are retried with back-off."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Publication:
    """What one pass publishes."""

    labels: dict[str, str]
    features: Features = field(default_factory=empty)


class Sink(Protocol):
    name: str

    def publish(self, pub: Publication) -> bool:
        """Publish; return True if something was written, False if unchanged."""
        ...

    def close(self) -> None:
        """Called once on exit."""
        ...
