"""Text on stdout, written again only when it changed: the hook output and ``--dry-run``."""

from __future__ import annotations

import sys
from typing import TextIO

from nfd_gpu.sinks import SinkError


class ChangedText:
    """Writes a text to ``stream`` when it differs from the last one written.

    - ``stream`` is by default stdout at write time.
    - ``separator`` goes between two writes.
    """

    def __init__(self, what: str, stream: TextIO | None = None, separator: str = "") -> None:
        self.what = what
        self.stream = stream
        self.separator = separator
        self._last: str | None = None

    def write(self, text: str) -> bool:
        """True when ``text`` was written; False when it is the same as the last one."""
        if text == self._last:
            return False
        out = self.stream or sys.stdout
        try:
            if self._last is not None and self.separator:
                out.write(self.separator)
            out.write(text)
            out.flush()
        except (OSError, ValueError) as e:
            raise SinkError(f"stdout: cannot write {self.what} output: {e}") from None
        self._last = text
        return True
