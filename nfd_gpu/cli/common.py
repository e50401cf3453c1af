"""What the commands share: the escaped line printed, the one-line error, the ``--root`` check."""

from __future__ import annotations

import os
import sys

import typer

from nfd_gpu.text import shown

# ``scan --format json`` / ``yaml`` documents: nfd_gpu/data/scan-v1.schema.json. Here, not in
# scan.py, so that ``nfd_gpu.cli`` exports it without importing the scan command's module
# (which ``run`` and the other commands do not need).
SCAN_API_VERSION = "nfd-gpu/v1"


def say(line: str, *, err: bool = False) -> None:
    """Print one line of the CLI's output, escaped by :func:`shown`."""
    print(shown(line), file=sys.stderr if err else sys.stdout)


def say_lines(text: str) -> None:
    """Print a rendered block such as a table, each line escaped."""
    for line in text.splitlines():
        say(line)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error and return the Exit to raise."""
    say(f"nfd-gpu: error: {message}", err=True)
    return typer.Exit(code)


def check_root(root: str) -> str:
    if not os.path.isdir(root):
        raise fail(f"--root {root}: not a directory")
    return root
