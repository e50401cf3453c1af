"""Typer options from the one declaration of the settings in :mod:`nfd_gpu.config.settings`.

- ``run`` gets one option per setting with a flag. Its signature is built here.
- ``scan`` and ``snapshot`` name theirs with :func:`scan_option`. It reads
  ``NFD_GPU_<KEY>`` through click.
- Both are :class:`SettingsCommand`. The ``{default}`` and ``{choices}`` placeholders of
  their help texts are filled when a help or a shell completion first lists the options.
- So starting the CLI, as ``nfd-gpu version``, loads no label code.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperOption

from nfd_gpu.config.settings import CONFIG_ENV, KINDS, SETTINGS, choices, env_var, fill, flags

_TYPES: dict[str, Any] = {"float": float, "bool": bool, "list": list[str], "str": str}


class SettingsCommand(TyperCommand):
    """A command whose option help texts are :mod:`nfd_gpu.config.settings` templates."""

    filled = False

    def fill_help(self) -> None:
        """Write the placeholders of the options' help texts in, once.

        - Only a help or a shell completion reads them.
        - Some choices are another module's: ``--profile``'s load the profile registry.
        """
        if not self.filled:
            self.filled = True
            for p in self.params:
                if isinstance(p, TyperOption) and p.name in SETTINGS and p.help:
                    p.help = fill(p.help, p.name)

    def get_params(self, ctx: Any) -> list[Any]:
        if ctx.resilient_parsing:  # shell completion, whose zsh and fish show the help
            self.fill_help()
        return super().get_params(ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """Write the help, naming each setting's ``NFD_GPU_<KEY>`` variable.

        - ``run``'s settings come from ``NFD_GPU_<KEY>`` too.
        - config/loader.py reads them itself, not click: above the file, below the flags.
        - The help names each variable as click does scan's.
        - They are set on the options only while the help is written.
        """
        self.fill_help()
        shown = []
        for p in self.params:
            if isinstance(p, TyperOption) and p.envvar is None:
                var = CONFIG_ENV if p.name == "config" else None
                var = env_var(p.name) if p.name in SETTINGS else var
                if var:
                    p.envvar, p.show_envvar = var, True
                    shown.append(p)
        try:
            super().format_help(ctx, formatter)
        finally:
            for p in shown:
                p.envvar, p.show_envvar = None, False


def completion(key: str) -> Any:
    """Shell completion of a setting's choices; None when it has none.

    A comma-separated list such as ``--output featurefile,no`` completes its last item.
    """
    if SETTINGS[key].choices is None:
        return None

    def complete(incomplete: str) -> list[str]:
        done, _, last = incomplete.rpartition(",")
        head = f"{done}," if done else ""
        return [head + c for c in choices(key) if c.startswith(last)]

    return complete


def scan_option(key: str) -> Any:
    """``scan``'s option for a setting: its scan help, flags and environment variable."""
    s = SETTINGS[key]
    return typer.Option(
        *(s.scan_flags or flags(key)),
        envvar=env_var(key),
        help=s.scan_help,
        autocompletion=completion(key),
    )


RootOption = Annotated[str, scan_option("root")]


def run_signature() -> inspect.Signature:
    """``run``'s parameters: ``--config`` and every setting with a flag, all None."""

    def param(name: str, typ: Any, option: Any) -> inspect.Parameter:
        annotation = Annotated[typ | None, option]
        kind = inspect.Parameter.KEYWORD_ONLY
        return inspect.Parameter(name, kind, default=None, annotation=annotation)

    config = typer.Option("--config", "-c", help="YAML config file")
    params = [param("config", str, config)]
    for key, s in SETTINGS.items():
        if s.run_help is not None:
            option = typer.Option(*flags(key), help=s.run_help, autocompletion=completion(key))
            params.append(param(key, _TYPES[KINDS[key]], option))
    return inspect.Signature(params, return_annotation=None)
