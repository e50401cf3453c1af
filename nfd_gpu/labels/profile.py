"""The shape of a label profile: a name, its labels from a snapshot, its documented keys.

- Every profile is ``labels(snapshot, options, warnings) -> {key: value}``.
- It reads only the :class:`~nfd_gpu.model.Snapshot` and the :class:`LabelOptions`:
  no host, file or YAML reading.
- It appends what it could not label to ``warnings``.
- ``table`` documents its keys as :class:`LabelDoc` rows.
- ``render_docs`` generates its docs/ page, ``docs``, from that table.
- The profiles, in order, are :data:`nfd_gpu.labels.registry.PROFILES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nfd_gpu.model import Snapshot
from nfd_gpu.names import LabelDoc
from nfd_gpu.record import Record, record

if TYPE_CHECKING:
    from nfd_gpu.labels.nvidia_options import NvidiaOptions


def in_table(table: tuple[LabelDoc, ...], key: str) -> bool:
    """Tell whether an unprefixed key matches an entry of ``table``."""
    return any(d.regex().match(key) for d in table)


def table_rows(prefix: str, table: tuple[LabelDoc, ...]) -> list[str]:
    """Return the markdown table of a label table, keys shown under ``prefix``."""
    rows = ["| key | value | meaning |", "|---|---|---|"]
    rows += [f"| `{prefix}/{d.key}` | {d.value} | {d.description} |" for d in table]
    return rows


@record(slots=False)
class LabelOptions(Record):
    """What the user chose for the profiles of one scan."""

    namespace: str  # the neutral profile's label prefix
    nvidia: NvidiaOptions | None = None  # MIG strategy, sharing, timestamp
    profile_options: tuple[str, ...] = ()  # names of nfd_gpu.labels.options.PROFILE_OPTIONS


@record(slots=False)
class Profile(Record):
    """One label profile; see the module docstring."""

    name: str
    labels: Callable[[Snapshot, LabelOptions, list[str]], dict[str, str]]
    table: tuple[LabelDoc, ...]
    docs: str  # the generated page, relative to the repository
    render_docs: Callable[[], str]
    # the label namespaces (key prefixes) it writes by default: what the admission policy
    # under deploy/ allows the agent's NodeFeature to carry (registry.label_namespaces)
    namespaces: tuple[str, ...] = ()
