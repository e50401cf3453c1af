"""The size of a NodeFeature object, and what fills it, for the sink's size refusals."""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]


def json_size(value: Any) -> int:
    """The bytes of ``value`` as compact JSON, as the sink sends it."""
    return len(json.dumps(value, separators=(",", ":")))


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
