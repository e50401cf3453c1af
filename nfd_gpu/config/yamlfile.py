"""Read one small YAML or JSON file: the configuration and the sharing config.

- The bytes come from :func:`nfd_gpu.host.boundedfile.read`.
  That is a regular file of at most ``CONFIG_MAX``: 1 MiB, a ConfigMap's limit.
  A FIFO or device is refused, never waited on.
- :func:`load` returns the parsed document or raises :class:`YamlFileError`.
  The error says which step failed: ``read``, ``utf-8`` or ``yaml``.
  So no exception of the reading escapes, a non-UTF-8 file included.
- :func:`load_mapping` returns the top-level mapping.
  It words that error in one line with the file's path, as its caller asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nfd_gpu.host import boundedfile
from nfd_gpu.host.boundedfile import CONFIG_MAX
from nfd_gpu.yamllib import yaml


class YamlFileError(Exception):
    """Why ``path`` gave no document.

    ``step`` is ``read``, ``utf-8`` or ``yaml``; :func:`load_mapping` adds ``mapping``.
    """

    def __init__(self, path: str, step: str, detail: str, line: int | None = None) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.step = step
        self.detail = detail
        self.line = line  # 1-based line of a YAML error, when the parser knows it


def load(path: str, limit: int = CONFIG_MAX) -> Any:
    """Return the document of ``path``; None for an empty file."""
    try:
        data = boundedfile.read(path, limit)
    except boundedfile.FileReadError as exc:
        raise YamlFileError(path, "read", exc.detail.removeprefix("cannot read: ")) from None
    try:
        return yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise YamlFileError(path, "utf-8", f"not UTF-8 (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise YamlFileError(path, "yaml", " ".join(str(exc).split()), line) from None


def load_mapping(path: str, wording: Mapping[str, str]) -> dict[str, Any]:
    """Return the top-level mapping of ``path``; an empty file is an empty mapping.

    On failure, raise a :class:`YamlFileError` whose message is ``<path>: `` and the
    caller's ``wording`` of the failed step:

    - a wording is a format string of ``detail`` and ``at``;
    - ``detail``: the reader's words;
    - ``at``: `` (line N)`` of a YAML error, else empty;
    - a step it does not word says ``detail``.
    """
    try:
        doc = load(path)
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise YamlFileError(path, "mapping", "expected a mapping at the top level")
        return doc
    except YamlFileError as exc:
        at = f" (line {exc.line})" if exc.line is not None else ""
        detail = wording.get(exc.step, "{detail}").format(detail=exc.detail, at=at)
        raise YamlFileError(path, exc.step, detail, exc.line) from None
