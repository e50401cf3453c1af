"""nfd-gpu: GPU feature discovery for Kubernetes Node Feature Discovery."""

from __future__ import annotations

__version__ = "0.1.0"

# The root option that prints the version: typer declares it (nfd_gpu/cli/__init__.py) and
# the entry point answers that one command line before typer is imported (nfd_gpu/entry.py).
VERSION_FLAG = "--version"


def version_line() -> str:
    """What ``nfd-gpu --version`` and ``nfd-gpu version`` print."""
    return f"nfd-gpu {__version__}"
