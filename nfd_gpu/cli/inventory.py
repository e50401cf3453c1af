"""``nfd-gpu inventory``: the cluster's GPUs from the agents' NodeFeatures, read-only."""

# no `from __future__ import annotations`: see cli/__init__.py

import enum
import gc
import os
import tempfile
from typing import Annotated

import typer

from nfd_gpu.cli.common import fail, say_lines


class Format(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"
    html = "html"


def inventory(
    kubeconfig: Annotated[
        str | None,
        typer.Option(
            "--kubeconfig", help="kubeconfig path (default: in-cluster, then ~/.kube/config)."
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="Only this namespace's NodeFeatures (default: all)."
        ),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
    ] = Format.table,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Write to this file (default: stdout).")
    ] = None,
    chunk_size: Annotated[
        int, typer.Option("--chunk-size", help="Objects per list request (as kubectl's).", min=1)
    ] = 500,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds each API request may take.", min=0.1)
    ] = 30.0,
) -> None:
    """List the cluster's GPUs (product x node x health) and where the API disagrees."""
    from nfd_gpu.inventory import render  # lazy: the client and the report, only here
    from nfd_gpu.inventory.collect import InventoryError, collect  # lazy: as above
    from nfd_gpu.inventory.report import build  # lazy: as above

    # the collector, off for start-up (nfd_gpu/entry.py), on for a read of the whole
    # cluster: its garbage grows with the nodes
    gc.enable()

    try:
        inv = build(collect(kubeconfig, namespace, timeout, chunk_size))
    except InventoryError as e:
        raise fail(str(e), code=1) from None
    if fmt is Format.html:
        from nfd_gpu.inventory.htmlpage import page  # lazy: only for html

        text = page(inv)
    else:
        text = {"table": render.table, "csv": render.csv_text, "json": render.json_text}[fmt.value](
            inv
        )
    if output is None and fmt.value == "table":
        say_lines(text)  # a terminal's: each line escaped (values come from the cluster)
        return
    if output is None:
        typer.echo(text, nl=False)
        return
    _write(output, text)


def _write(path: str, text: str) -> None:
    """Write ``path`` whole or not at all: a temporary file renamed over it."""
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".inventory-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        raise fail(f"--output {path}: {e.strerror or e}", code=1) from None
