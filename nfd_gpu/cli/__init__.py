"""``nfd-gpu`` command line: a thin typer layer over scan, snapshot, run, inventory, rules.

- One command group per module: ``scan.py``, ``capture.py`` for ``snapshot``, ``run.py``,
  ``inventory.py``, ``rules.py``.
- Their options come from the declaration of the settings in
  ``nfd_gpu/config/settings.py``, through ``options.py``.
- ``main`` runs a command line.
- ``console`` is the ``nfd-gpu`` process: ``nfd_gpu.cli:console``, ``python -m nfd_gpu.cli``.
"""

# no `from __future__ import annotations`: typer reads the commands' annotations at every
# start, and string ones it must compile and evaluate each time (~1.7 ms a start)

import gc
import importlib
from typing import Annotated

import typer

from nfd_gpu import VERSION_FLAG, version_line
from nfd_gpu.cli import capture, inventory, rules, run, scan
from nfd_gpu.cli.common import say
from nfd_gpu.cli.options import SettingsCommand
from nfd_gpu.cli.scan import SCAN_API_VERSION

__all__ = ["SCAN_API_VERSION", "app", "main"]


def _usage_error_types() -> tuple[type[Exception], ...]:
    """click's UsageError, of the click typer runs on.

    - typer >= 0.28 vendors click as ``typer._click``, already loaded by typer.
    - Older releases import ``click``.
    - Only the first found is taken. Importing an installed ``click`` that typer does not
      use costs every start ~10 ms.
    """
    for mod in ("typer._click.exceptions", "click.exceptions"):
        try:
            return (importlib.import_module(mod).UsageError,)
        except (ImportError, AttributeError):
            continue
    return ()


_USAGE_ERRORS = _usage_error_types()


app = typer.Typer(
    name="nfd-gpu",
    help="GPU feature discovery for Kubernetes Node Feature Discovery (NFD).",
    no_args_is_help=True,
    # typer's shell completion: --install-completion / --show-completion, or
    # eval "$(_NFD_GPU_COMPLETE=bash_source nfd-gpu)" (docs/operations.md).
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            VERSION_FLAG,  # nfd_gpu/entry.py answers this one command line itself
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """GPU feature discovery for Kubernetes Node Feature Discovery (NFD)."""


def version() -> None:
    """Print the nfd-gpu version."""
    typer.echo(version_line())


# the order of `nfd-gpu --help`
app.command(cls=SettingsCommand)(scan.scan)
app.command()(capture.snapshot)
app.command("run", cls=SettingsCommand)(run.run_command)
app.command()(inventory.inventory)
app.command()(version)
app.add_typer(rules.rules_app, name="rules")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: usage errors become one line and exit 2."""
    try:
        rv = app(args=argv, standalone_mode=False)
    except _USAGE_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        where = getattr(ctx, "command_path", None) or "nfd-gpu"
        message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
        if message:
            say(f"{where}: error: {message}", err=True)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        say("nfd-gpu: aborted", err=True)
        return 1
    except BrokenPipeError:
        return 0
    return rv if isinstance(rv, int) else 0


def console() -> int:
    """The ``nfd-gpu`` process: :func:`main` on its command line, the process ending with it.

    What is alive is frozen out of the garbage collector by :func:`gc.freeze`, when the
    command starts and when it ends:

    - interpreter shutdown runs full collections;
    - they would otherwise traverse every object typer and the scan made;
    - that is ~15% of a 27-function ``scan``'s CPU time.

    The agent, ``run``, keeps its start-up objects frozen, as they live as long as it does.
    Nothing is collected less. Only cycles frozen at the end could be, and the process is
    exiting.
    """
    gc.freeze()
    try:
        return main()
    finally:
        gc.freeze()
