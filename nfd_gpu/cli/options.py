"""Typer options from the one declaration of the settings (:mod:`nfd_gpu.settings`).

``run`` gets one option per setting with a flag (its signature is built here); ``scan`` and
``snapshot`` name theirs with :func:`scan_option`, which reads ``NFD_GPU_<KEY>`` through
click. Both are :class:`SettingsCommand`: the ``{default}``/``{choices}`` placeholders of
their help texts are filled when the options are first listed, so that starting the CLI
(``nfd-gpu version``) loads no label code.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperOption

from nfd_gpu.settings import CONFIG_ENV, KINDS, SETTINGS, env_var, fill, flags

_TYPES: dict[str, Any] = {"float": float, "bool": bool, "list": list[str], "str": str}


class SettingsCommand(TyperCommand):
    """A command whose option help texts are :mod:`nfd_gpu.settings` templates."""

    filled = False

    def get_params(self, ctx: Any) -> list[Any]:
        if not self.filled:
            self.filled = True
            for p in self.params:
                if isinstance(p, TyperOption) and p.name in SETTINGS and p.help:
                    p.help = fill(p.help, p.name)
        return super().get_params(ctx)


def scan_option(key: str) -> Any:
    """``scan``'s option for a setting: its scan help, flags and environment variable."""
    s = SETTINGS[key]
    return typer.Option(*(s.scan_flags or flags(key)), envvar=env_var(key), help=s.scan_help)


RootOption = Annotated[str, scan_option("root")]


def run_signature() -> inspect.Signature:
    """``run``'s parameters: ``--config`` and every setting with a flag, all unset (None)."""

    def param(name: str, typ: Any, option: Any) -> inspect.Parameter:
        annotation = Annotated[typ | None, option]
        kind = inspect.Parameter.KEYWORD_ONLY
        return inspect.Parameter(name, kind, default=None, annotation=annotation)

    config = typer.Option("--config", "-c", help=f"YAML config file (env {CONFIG_ENV})")
    params = [param("config", str, config)]
    for key, s in SETTINGS.items():
        if s.run_help is not None:
            option = typer.Option(*flags(key), help=s.run_help)
            params.append(param(key, _TYPES[KINDS[key]], option))
    return inspect.Signature(params, return_annotation=None)
