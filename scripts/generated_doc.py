"""Write a generated document, or with ``--check`` only say whether it is out of date."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, want: str, argv: list[str], command: str) -> int:
    """``--check`` in ``argv``: 1 (with a line naming ``command``) when ``path`` is not
    ``want``, else 0. Without it: write ``want`` to ``path``."""
    if "--check" in argv:
        if not path.is_file() or path.read_text(encoding="utf-8") != want:
            print(f"{path}: out of date; run: {command}", file=sys.stderr)
            return 1
        return 0
    path.write_text(want, encoding="utf-8")
    return 0
