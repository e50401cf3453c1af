"""Hook sink: ``key=value`` lines on stdout, NFD's local-hook format.

NFD ran hooks from ``source.d/`` until v0.17 (NFD's ``source/local``); the same output also
serves as a feature file body for a wrapper script. Lines are sorted; logs go to stderr,
so stdout carries nothing else. In a loop the set is printed again only when it changed,
followed by an empty line as a separator.
"""

from __future__ import annotations

import sys
from typing import TextIO

from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.featurefile import render_body


class HookSink:
    name = "hook"

    def __init__(self, stream: TextIO | None = None, *, raw_features: bool = False) -> None:
        self.stream = stream
        self.raw_features = raw_features
        self._last: str | None = None

    def publish(self, pub: Publication) -> bool:
        body = render_body(pub, raw=self.raw_features)
        if body == self._last:
            return False
        out = self.stream or sys.stdout
        try:
            if self._last is not None:
                out.write("\n")
            out.write(body)
            out.flush()
        except (OSError, ValueError) as e:
            raise SinkError(f"stdout: cannot write hook output: {e}") from None
        self._last = body
        return True

    def close(self) -> None:
        return None
