"""``nfd-gpu snapshot``: capture what a scan reads, for replay with ``scan --root``."""

# no `from __future__ import annotations`: see cli/__init__.py

from typing import Annotated

import typer

from nfd_gpu.cli.common import check_root, fail, say
from nfd_gpu.cli.options import RootOption
from nfd_gpu.config.settings import Config


def snapshot(
    dest: Annotated[str, typer.Argument(metavar="DIR", help="Empty or new directory to write.")],
    root: RootOption = Config.root,
    xid_seconds: Annotated[
        float,
        typer.Option(
            "--xid-seconds",
            help="Then record NVML's XID events for this many seconds (default 0: none).",
        ),
    ] = 0.0,
) -> None:
    """Capture what a scan reads (and NVML's answers) into DIR; replay: scan --root DIR."""
    from nfd_gpu.capture import CaptureError, capture_host  # lazy: discovery code

    check_root(root)
    try:
        report = capture_host(dest, root, xid_seconds=xid_seconds)
    except CaptureError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{dest}: {exc.strerror or exc}") from None
    say(
        f"{report.dest}: {len(report.files)} file(s), {len(report.links)} link(s), "
        f"{len(report.markers)} marker(s), {report.bytes} bytes, nvml {report.nvml}"
        + (f", {len(report.skipped)} skipped" if report.skipped else "")
    )
