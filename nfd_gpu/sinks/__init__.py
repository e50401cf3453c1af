"""Publishing sinks: where a scan result goes, and the shape of an output.

- Each sink takes a :class:`Publication`, labels + raw features.
- It either writes it, finds it unchanged, or raises :class:`SinkError`.
- A failed write never damages what was published before.

An output, ``--output NAME``, is an :class:`Output`:

- its sink module defines one ``OUTPUT``;
- :data:`nfd_gpu.sinks.registry.OUTPUTS` lists them;
- the setting's choices, the agent's sinks, ``--dry-run``, the configuration checks and the
  start-up line read that list.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any, Protocol, TextIO

from nfd_gpu.features import Features, empty
from nfd_gpu.record import Record, record


class SinkError(Exception):
    """Publishing failed. ``transient`` errors, 5xx and timeouts, are retried with back-off."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@record(slots=False)
class Publication(Record):
    """What one pass publishes."""

    labels: dict[str, str]
    features: Features = field(default_factory=empty)
    # the agent's held health (one line of JSON, "" for none: agent/heldstate.py), stored
    # beside the labels where the sink publishes them and read back at start
    state: str = ""


class Sink(ABC):
    """Where a publication goes.

    - Every sink subclasses this and writes ``publish``.
    - The other hooks default to doing nothing, for a sink with nothing to cut, release or report.
    """

    name: str
    # set by the agent: run a pass now (a sink that watches what it published calls it
    # when that changed behind the agent's back)
    on_drift: Callable[[], object] | None = None

    @abstractmethod
    def publish(self, pub: Publication) -> bool:
        """Publish; return True if something was written, False if unchanged."""

    def where(self) -> str:
        """Where its output is, for a message: the file, the object."""
        return self.name

    def read_state(self) -> str | None:
        """The ``Publication.state`` this sink's output holds now.

        - That is what an earlier run of the agent published.
        - None when there is none or the sink keeps none.
        - SinkError when it cannot be read.
        """
        return None

    def take_repair(self) -> str | None:
        """What the last write restored, once: it was changed behind the agent's back.

        None: nothing.
        """
        return None

    def degraded(self) -> str | None:
        """Why the sink works but less well than it should, a ``/readyz`` line; or None."""
        return None

    def abort(self) -> None:
        """Stop now: cut what is in flight; later calls fail at once.

        Called on SIGTERM, from any thread.
        """
        return None

    def detach(self) -> None:
        """Stop what runs in the background, a watch: a reload replaced this sink.

        Unlike :meth:`close`, never removes what it published: the new sink takes it over.
        """
        return None

    def close(self) -> None:
        """Called once on exit."""
        return None


class OutputSettings(Protocol):
    """The settings an output reads, as :class:`nfd_gpu.config.settings.Config` declares them.

    It is a protocol, not ``Config`` itself:

    - the ``outputs`` setting takes its choices from the registry;
    - so the registry cannot import ``settings`` back; ``tests/test_layers.py`` counts that cycle;
    - mypy checks that a ``Config`` is one wherever an output is built;
    - ``tests/sinks/test_output_registry.py`` checks that each type is the setting's.
    """

    @property
    def root(self) -> str: ...
    @property
    def oneshot(self) -> bool: ...
    @property
    def interval(self) -> float: ...
    @property
    def features_dir(self) -> str: ...
    @property
    def features_file(self) -> str: ...
    @property
    def expiry(self) -> float: ...
    @property
    def raw_features(self) -> bool: ...
    @property
    def remove_on_exit(self) -> bool: ...
    @property
    def node_name(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def pod_name(self) -> str | None: ...
    @property
    def pod_uid(self) -> str | None: ...
    @property
    def owner_refs(self) -> tuple[str, ...]: ...
    @property
    def kubeconfig(self) -> str | None: ...
    @property
    def api_timeout(self) -> float: ...
    @property
    def resync_interval(self) -> float: ...


def no_problem(_cfg: OutputSettings) -> str | None:
    return None


def no_values(_values: Mapping[str, Any]) -> dict[str, Any]:
    return {}


@record(slots=False)
class Output(Record):
    """One ``--output``: how its sink is built and what it asks of the configuration.

    - Its name and how its sink is built.
    - Its ``--dry-run`` form.
    - The settings its sink is built from; a reload rebuilds the sinks when one changes.
    - What the configuration must satisfy when it is chosen.
    - The start-up line's part.
    - The settings it fills in when chosen and not given: ``config.load``, from the settings
      read so far, before validation.
    - When it is not chosen, what removes at start what an earlier run published; never in a
      dry run.
    """

    name: str
    settings: tuple[str, ...]
    build: Callable[[OutputSettings], Sink]  # SinkError: unusable (no Kubernetes client)
    dry_run: Callable[[OutputSettings, TextIO | None], Sink]  # prints, writes nothing
    check: Callable[[OutputSettings], str | None] = no_problem  # the problem, if any
    describe: Callable[[OutputSettings], str] | None = None  # `key=value` at start
    deprecated: str = ""  # why, when the output goes in the next minor release
    repairs: bool = False  # its sink restores what was changed behind its back (take_repair)
    fill: Callable[[Mapping[str, Any]], dict[str, Any]] = no_values
    retire: Callable[[OutputSettings], None] | None = None  # never fatal: logs
