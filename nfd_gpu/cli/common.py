"""What the commands share: the one-line error and the ``--root`` check."""

from __future__ import annotations

import os

import typer


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error and return the Exit to raise."""
    typer.echo(f"nfd-gpu: error: {message}", err=True)
    return typer.Exit(code)


def check_root(root: str) -> str:
    if not os.path.isdir(root):
        raise fail(f"--root {root}: not a directory")
    return root
