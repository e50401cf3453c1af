"""``nfd-gpu`` command line: a thin typer layer over scan, snapshot, run, inventory, rules.

- One command group per module: ``scan.py``, ``capture.py`` for ``snapshot``, ``run.py``,
  ``inventory.py``, ``rules.py``.
- A command's module is imported, and typer builds its command, when the command line names
  it: :class:`Commands`. So ``scan`` builds neither ``run``'s options nor the others'.
- ``--help`` and shell completion list them all, so they build them all.
- Their options come from the declaration of the settings in
  ``nfd_gpu/config/settings.py``, through ``options.py``.
- ``main`` runs a command line.
- ``console`` is the ``nfd-gpu`` process: ``nfd_gpu.cli:console``, ``python -m nfd_gpu.cli``.
"""

# no `from __future__ import annotations`: typer reads the commands' annotations at every
# start, and string ones it must compile and evaluate each time (~1.7 ms a start)

import gc
import importlib
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from nfd_gpu import VERSION_FLAG, version_line
from nfd_gpu.cli.common import SCAN_API_VERSION, say
from nfd_gpu.cli.options import SettingsCommand

__all__ = ["SCAN_API_VERSION", "app", "main"]

# The commands in the order of `nfd-gpu --help`: name -> (module of nfd_gpu.cli, its typer
# function or sub-app, the command's class); "version" is this module's own.
COMMANDS: dict[str, tuple[str, str, Any]] = {
    "scan": ("scan", "scan", SettingsCommand),
    "snapshot": ("capture", "snapshot", None),
    "run": ("run", "run_command", SettingsCommand),
    "inventory": ("inventory", "inventory", None),
    "version": ("", "version", None),
    "rules": ("rules", "rules_app", None),
}


class Commands(TyperGroup):
    """The root group: a command is built by typer the first time it is looked up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(_built(cmd_name), cmd_name)
        return self.commands.get(cmd_name)


def _built(name: str) -> Any:
    """Command ``name`` as typer builds it from its module's function or sub-app."""
    module, attr, cls = COMMANDS[name]
    where = importlib.import_module(f"nfd_gpu.cli.{module}") if module else None
    obj = getattr(where, attr) if where else globals()[attr]
    if not isinstance(obj, typer.Typer):
        obj_app = typer.Typer(add_completion=False)  # one command: typer builds it alone
        obj_app.command(name, cls=cls)(obj)
        obj = obj_app
    cmd = typer.main.get_command(obj)
    cmd.name = name
    return cmd


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
    cls=Commands,
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
