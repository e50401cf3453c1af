"""Agent logging: one stderr handler, text or one JSON record per line.

Uncaught exceptions in any thread are logged, never printed raw.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from types import TracebackType
from typing import Any

from nfd_gpu.text import shown

log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Format ``<time> <LEVEL> <logger>: <message>``, one line whatever the message holds.

    A traceback still follows on its own lines.
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record))  # one line: controls, bidi escaped


def setup_logging(fmt: str = "text", level: str = "info") -> None:
    """Set up one stderr handler.

    - With ``json`` every line is one JSON record, tracebacks included.
    - An exception in any thread is logged, never printed raw.
    """
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "?"
        log.error(
            "uncaught exception in thread %s",
            name,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    threading.excepthook = thread_hook

    def main_hook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.critical("uncaught exception", exc_info=(exc_type, exc, tb))

    sys.excepthook = main_hook


def one_line(exc: BaseException) -> str:
    """An exception as one log-friendly line: its type and at most 300 characters."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__
