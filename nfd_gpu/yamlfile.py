"""Reading one small YAML (or JSON) file: the configuration and the sharing config.

:func:`load` returns the parsed document or raises :class:`YamlFileError` that says which
step failed (``read``, ``utf-8`` or ``yaml``), so each caller words its one-line error
with the file's path and no exception of the reading escapes (a non-UTF-8 file included).
"""

from __future__ import annotations

from typing import Any

import yaml


class YamlFileError(Exception):
    """Why ``path`` gave no document: ``step`` is ``read``, ``utf-8`` or ``yaml``."""

    def __init__(self, path: str, step: str, detail: str, line: int | None = None) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.step = step
        self.detail = detail
        self.line = line  # 1-based line of a YAML error, when the parser knows it


def load(path: str) -> Any:
    """The document of ``path`` (None for an empty file)."""
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)  # marks name the file: in "<path>", line N
    except OSError as exc:
        raise YamlFileError(path, "read", exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise YamlFileError(path, "utf-8", f"not UTF-8 (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise YamlFileError(path, "yaml", " ".join(str(exc).split()), line) from None
