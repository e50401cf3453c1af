"""The own-object watch's stream: its events line by line, and the head of an event alone.

- kube-apiserver writes a watch as newline-delimited JSON events.
- :func:`event_head` decodes an ADDED or MODIFIED event's type and its object's metadata
  only: enough to know the echo of the sink's own write (``nodefeature_watch.py``), whose
  object the sink ignores.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

Obj = dict[str, Any]
MAX_LINE = 4 * 1024 * 1024  # one event: a NodeFeature is at most ~1.5 MiB in etcd

_DECODER = json.JSONDecoder()
_WS = "[ \t\n\r]*"  # JSON's white space
_SPACE = re.compile(_WS)
# an ADDED or MODIFIED event up to its object's first key; kube-apiserver writes
# {"type":"MODIFIED","object":{"apiVersion":...,"kind":...,"metadata":{...},"spec":{...}}}
# (Go's encoding of a custom resource, an unstructured object: its keys sorted)
_EVENT_START = re.compile(
    _WS.join([r"\{", '"type"', ":", '"(ADDED|MODIFIED)"', ",", '"object"', ":", r"\{", ""])
)


def _space(text: str, pos: int) -> int:
    """The position after JSON white space at ``pos``."""
    m = _SPACE.match(text, pos)
    return m.end() if m else pos


def event_head(line: bytes) -> tuple[str, Obj] | None:
    """An ADDED or MODIFIED event's type and its object's metadata, decoded alone.

    - The object's keys before ``metadata`` may be ``apiVersion`` and ``kind`` only.
    - None for any other line, for the caller to decode whole.
    - Only the head is read: what follows the metadata is not checked (a full decode would
      refuse a line cut there, or take a repeated key's last value). The watch leaves
      undecoded only an event with the agent's own resourceVersion.
    """
    try:
        text = line.decode("utf-8")
        m = _EVENT_START.match(text)
        if m is None:
            return None
        pos = m.end()
        for _ in range(3):  # apiVersion, kind, metadata
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _space(text, pos)
            if text[pos : pos + 1] != ":":
                return None
            pos = _space(text, pos + 1)
            value, pos = _DECODER.raw_decode(text, pos)
            if key == "metadata":
                return (m.group(1), value) if isinstance(value, dict) else None
            if key not in ("apiVersion", "kind"):
                return None
            pos = _space(text, pos)
            if text[pos : pos + 1] != ",":
                return None
            pos = _space(text, pos + 1)
    except (UnicodeDecodeError, ValueError):
        return None
    return None


class WatchStop(Exception):
    """The watch was stopped by close or abort."""


def stream_lines(resp: Any, stop: threading.Event) -> Any:
    """The newline-delimited events of a watch stream; :class:`WatchStop` once ``stop`` is set."""
    buf = b""
    for chunk in resp.stream(65536, decode_content=True):
        if stop.is_set():
            raise WatchStop
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
        if len(buf) > MAX_LINE:
            raise RuntimeError(f"watch event larger than {MAX_LINE} bytes")
    if stop.is_set():
        raise WatchStop
    if buf.strip():
        yield buf
