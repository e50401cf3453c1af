"""The size of a NodeFeature object, and what fills it, for the sink's size refusals."""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]


# Go's encoding/json, which kube-apiserver writes a custom resource with, escapes these
# (``<`` as ``\u003c``): each stored character is 6 bytes, not its UTF-8 length.
_GO_ESCAPED = {"<": 5, ">": 5, "&": 5, "\u2028": 3, "\u2029": 3}  # bytes over UTF-8


def json_size(value: Any) -> int:
    """The bytes of ``value`` as compact JSON, as kube-apiserver stores it.

    - UTF-8 text, as Go writes it: ``é`` is 2 bytes, not an escape of 6.
    - ``<``, ``>``, ``&``, U+2028 and U+2029 as Go escapes them: 6 bytes each.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode("utf-8", "surrogatepass"))
    return size + sum(extra * text.count(c) for c, extra in _GO_ESCAPED.items())


def size_note(want: Obj) -> str:
    """What fills an object, as one note.

    ``N bytes: L labels (B bytes), features F bytes,``
    ``the largest <kind> <name> (S bytes, E entries)``
    """
    spec = want["spec"]
    sets = {
        f"{kind} {name}": fs
        for kind, named in spec["features"].items()
        for name, fs in named.items()
        if isinstance(fs, dict)
    }
    note = (
        f"{json_size(want)} bytes: {len(spec['labels'])} labels ({json_size(spec['labels'])} "
        f"bytes), features {json_size(spec['features'])} bytes"
    )
    if sets:
        sizes = {k: json_size(fs) for k, fs in sets.items()}
        big = max(sizes, key=lambda k: sizes[k])
        entries = len(sets[big].get("elements") or ())
        note += f", the largest {big} ({sizes[big]} bytes, {entries} entries)"
    return note


def _entry(k: str, v: str) -> int:
    return json_size(k) + 1 + json_size(v)  # "k":"v"


class LabelMeasure:
    """A label set's compact JSON size and its keys outside a set of prefixes, kept from the
    last label set by what changed.

    - A changed pass with rules publishes hundreds of labels of which few changed.
    - ``{"k":"v",...}`` is 2 bytes, each entry's ``"k":"v"``, and a comma between entries.
    """

    def __init__(self) -> None:
        self._labels: dict[str, str] = {}
        self._entries = 0
        self._outside: set[str] = set()
        self._sorted: list[str] = []

    def update(self, labels: dict[str, str], allowed: tuple[str, ...]) -> tuple[int, list[str]]:
        """``json_size(labels)`` and the sorted keys that start with none of ``allowed``.

        - Only the entries that differ from the last set are walked: the symmetric
          difference of the items, built in C. A changed label is in it twice, with its new
          value and its old one; it is measured again at the new one.
        - The keys outside are sorted again only when one of them came or went.
        """
        old = self._labels
        if labels == old:
            return 2 + self._entries + max(len(labels) - 1, 0), self._sorted
        outside, gone = len(self._outside), False
        for k, v in labels.items() ^ old.items():  # values are strings
            if k not in labels:  # gone
                self._entries -= _entry(k, v)
                gone = gone or k in self._outside
                self._outside.discard(k)
                continue
            if labels[k] is not v:  # the old value of a changed label: measured at the new one
                continue
            was = old.get(k)
            if was is None:  # a new key
                if not k.startswith(allowed):
                    self._outside.add(k)
            else:
                self._entries -= _entry(k, was)
            self._entries += _entry(k, v)
        if gone or len(self._outside) != outside:
            self._sorted = sorted(self._outside)
        self._labels = dict(labels)
        return 2 + self._entries + max(len(labels) - 1, 0), self._sorted
