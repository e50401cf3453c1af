"""Last valid configuration wins.

A configuration file that becomes unreadable or invalid while the agent runs keeps its
last valid parsed version, so the labels stay as they were. Such files are the rules, the
sharing config and the agent's configuration file.

Each such file is *stale* until it is valid again:

- one warning when it becomes stale or its problem changes, not one per pass;
- ``nfd_gpu_config_stale{file}`` is 1;
- the reason is in ``/readyz``'s body, still 200: the agent scans and publishes with the
  last valid configuration.

A valid change is honoured and logged with what it changed.

A file broken with *no* valid version is *unusable*. It was broken at start, or it is a
new rule file broken from its first read. While one is:

- the agent publishes nothing new;
- at start, what the Node already carries stays untouched;
- so a restart never replaces the labels with ones built without that file;
- ``/readyz`` is 503 with the reason, so a rollout stops at ``maxUnavailable``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)

T = TypeVar("T")


class StaleFiles:
    """Which configuration files are stale, and why; says each change once."""

    def __init__(self, metrics: Any = None) -> None:
        self.metrics = metrics
        self.reasons: dict[str, str] = {}
        self.unusable: dict[str, str] = {}  # stale with no valid version: file -> reason

    def stale(self, file: str, reason: str, *, kept: bool = True) -> None:
        """Mark ``file`` unreadable or invalid.

        With ``kept`` its last valid version is used; else there is none and it is ignored.
        """
        if self.reasons.get(file) == reason and (file in self.unusable) == (not kept):
            return
        self.reasons[file] = reason
        if kept:
            self.unusable.pop(file, None)
            what = "keeping its last valid version"
        else:
            self.unusable[file] = reason
            what = "no valid version yet: publishing nothing new until it is valid"
        log.warning("%s: %s; %s", file, reason, what)
        if self.metrics is not None:
            self.metrics.set_config_stale(file, reason)

    def valid(self, file: str) -> None:
        self.unusable.pop(file, None)
        if self.reasons.pop(file, None) is None:
            return
        log.info("%s: valid again", file)
        if self.metrics is not None:
            self.metrics.set_config_stale(file, None)

    def forget(self, file: str) -> None:
        """Mark ``file`` no longer configured: neither stale nor unusable."""
        self.unusable.pop(file, None)
        if self.reasons.pop(file, None) is not None and self.metrics is not None:
            self.metrics.set_config_stale(file, None)

    def blocking(self) -> str | None:
        """Why nothing new may be published because of an unusable file, or None."""
        if not self.unusable:
            return None
        file = min(self.unusable)
        more = f" (and {len(self.unusable) - 1} more files)" if len(self.unusable) > 1 else ""
        return f"{file}: {self.unusable[file]}; no valid version yet{more}"


def changes(old: Any, new: Any) -> str:
    """The fields of two dataclass instances that differ: ``name: old -> new, ...``."""
    parts = [
        f"{f.name}: {getattr(old, f.name)!r} -> {getattr(new, f.name)!r}"
        for f in dataclasses.fields(old)
        if getattr(old, f.name) != getattr(new, f.name)
    ]
    return ", ".join(parts) or "nothing"


class LastValid(Generic[T]):
    """One file's last valid parsed value."""

    def __init__(self, stale: StaleFiles, what: str) -> None:
        self.stale = stale
        self.what = what  # "sharing config", for the log line of a valid change
        self._file: str | None = None
        self._value: T | None = None

    def get(self, file: str, load: Callable[[], T], fallback: T) -> T:
        """Return ``load()``'s value, or the last valid one when it raises ValueError.

        With no valid one yet, ``fallback``.
        """
        if file != self._file:
            if self._file is not None:
                self.stale.forget(self._file)
            self._file, self._value = file, None
        try:
            value = load()
        except ValueError as exc:
            self.stale.stale(file, str(exc).removeprefix(f"{file}: "), kept=self._value is not None)
            return self._value if self._value is not None else fallback
        self.stale.valid(file)
        if self._value is not None and value != self._value:
            log.info("%s %s changed: %s", self.what, file, changes(self._value, value))
        self._value = value
        return value
