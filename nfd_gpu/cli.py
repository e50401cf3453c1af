"""``nfd-gpu`` command line: a thin typer layer over scan / snapshot / rules / run."""

from __future__ import annotations

import enum
import importlib
import json
import os
import sys
import time
from typing import Annotated, Any

import typer

from nfd_gpu import __version__


def _usage_error_types() -> tuple[type[Exception], ...]:
    """click's UsageError: typer >= 0.29 vendors click as ``typer._click``."""
    found: list[type[Exception]] = []
    for mod in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(mod).UsageError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


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

# ``scan --format json`` / ``yaml`` documents: nfd_gpu/data/scan-v1.schema.json.
SCAN_API_VERSION = "nfd-gpu/v1"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"nfd-gpu {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """GPU feature discovery for Kubernetes Node Feature Discovery (NFD)."""


class Format(str, enum.Enum):
    labels = "labels"
    json = "json"
    yaml = "yaml"
    table = "table"


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error and return the Exit to raise."""
    typer.echo(f"nfd-gpu: error: {message}", err=True)
    return typer.Exit(code)


def check_root(root: str) -> str:
    if not os.path.isdir(root):
        raise fail(f"--root {root}: not a directory")
    return root


RootOption = Annotated[
    str,
    typer.Option(
        "--root",
        envvar="NFD_GPU_ROOT",
        help="Host root to read sys/, proc/, dev/, etc/ from (a fixture or capture in tests).",
    ),
]


@app.command()
def scan(
    root: RootOption = "/",
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
    ] = Format.labels,
    rules: Annotated[
        str | None,
        typer.Option(
            "--rules", envvar="NFD_GPU_RULES", help="NodeFeatureRule file or directory to apply."
        ),
    ] = None,
    profile: Annotated[
        list[str] | None,
        typer.Option(
            "--profile",
            "-p",
            envvar="NFD_GPU_PROFILES",
            help="Label profile (repeatable): neutral (default), nvidia, amd, intel.",
        ),
    ] = None,
    profile_option: Annotated[
        list[str] | None,
        typer.Option(
            "--profile-option",
            envvar="NFD_GPU_PROFILE_OPTIONS",
            help="Opt-in label group of a profile (repeatable): amd-beta, amd-driver-version, ...",
        ),
    ] = None,
    mig_strategy: Annotated[
        str | None,
        typer.Option(
            "--mig-strategy",
            envvar="NFD_GPU_MIG_STRATEGY",
            help="nvidia profile MIG strategy: none (default, as GFD), single, mixed, auto.",
        ),
    ] = None,
    sharing_config: Annotated[
        str | None,
        typer.Option(
            "--sharing-config",
            envvar="NFD_GPU_SHARING_CONFIG",
            help="Device-plugin config file (sharing.timeSlicing/mps replicas, flags.migStrategy).",
        ),
    ] = None,
    gfd_timestamp: Annotated[
        bool,
        typer.Option(
            "--gfd-timestamp",
            envvar="NFD_GPU_GFD_TIMESTAMP",
            help="nvidia profile: emit gfd.timestamp (this run's start, Unix seconds).",
        ),
    ] = False,
    nvml: Annotated[
        str,
        typer.Option(
            "--nvml",
            envvar="NFD_GPU_NVML",
            help="NVML: auto (ROOT/nvml.json, else pynvml, else procfs), on (required: "
            "exit 1 when NVML does not answer), off.",
        ),
    ] = "auto",
) -> None:
    """Scan this host (or --root) and print labels, features and GPUs."""
    from nfd_gpu.labels import registry
    from nfd_gpu.scan import run_scan

    check_root(root)
    if rules is not None and not os.path.exists(rules):
        raise fail(f"--rules {rules}: no such file or directory")
    from nfd_gpu.discovery.nvml_session import NVML_MODES, NvmlRequired

    if nvml not in NVML_MODES:
        raise fail(f"--nvml {nvml}: expected auto, on or off")
    profiles = tuple(profile) if profile else registry.DEFAULT
    bad = registry.unknown(profiles)
    if bad is not None:
        raise fail(f"--profile {bad}: unknown (known: {registry.known()})")
    from nfd_gpu.labels.options import check

    options = tuple(o for v in profile_option or () for o in v.split(",") if o)
    problem = check(options, profiles)
    if problem:
        raise fail(f"--profile-option: {problem}")
    try:
        nvidia_options = _nvidia_options(
            mig_strategy, sharing_config, int(time.time()) if gfd_timestamp else None
        )
        result = run_scan(
            root,
            rules_path=rules,
            profiles=profiles,
            profile_options=options,
            nvidia_options=nvidia_options,
            nvml=nvml,
        )
    except NvmlRequired as exc:
        raise fail(str(exc), 1) from None
    except Exception as exc:
        from nfd_gpu.rules import RuleError

        if isinstance(exc, RuleError):
            lines = str(exc).splitlines() or ["invalid rules"]
            for line in lines[:-1]:
                typer.echo(f"nfd-gpu: error: {line}", err=True)
            raise fail(lines[-1]) from None
        raise
    for w in result.warnings:
        # Warnings go to stderr so `--format labels` stays a clean key=value stream.
        print(f"warning: {w}", file=sys.stderr)
    if result.errors:
        # an incomplete scan describes this process (out of descriptors, memory), not
        # the host: print no labels a hook could publish
        n = len(result.errors)
        raise fail(f"scan incomplete, no output ({n} error(s)): {result.errors[0]}", 1)
    if fmt is Format.labels:
        for k in sorted(result.labels):
            typer.echo(f"{k}={result.labels[k]}")
        return
    doc: dict[str, Any] = {
        "apiVersion": SCAN_API_VERSION,
        "labels": dict(sorted(result.labels.items())),
        "features": result.features,
        "gpus": [g for g in result.snapshot.to_dict()["gpus"]],
        "warnings": result.warnings,
    }
    if fmt is Format.json:
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif fmt is Format.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=True), nl=False)
    else:
        typer.echo(render_table(result), nl=False)


@app.command()
def snapshot(
    dest: Annotated[str, typer.Argument(metavar="DIR", help="Empty or new directory to write.")],
    root: RootOption = "/",
) -> None:
    """Capture what a scan reads (and NVML's answers) into DIR; replay: scan --root DIR."""
    from nfd_gpu.snapshot import SnapshotError, take_snapshot

    check_root(root)
    try:
        report = take_snapshot(dest, root)
    except SnapshotError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{dest}: {exc.strerror or exc}") from None
    typer.echo(
        f"{report.dest}: {len(report.files)} file(s), {len(report.links)} link(s), "
        f"{len(report.markers)} marker(s), {report.bytes} bytes, nvml {report.nvml}"
        + (f", {len(report.skipped)} skipped" if report.skipped else "")
    )


def _nvidia_options(
    mig_strategy: str | None, sharing_config: str | None, timestamp: int | None = None
) -> Any:
    from nfd_gpu.labels.nvidia import MIG_STRATEGIES, NvidiaOptions
    from nfd_gpu.sharing_config import load_sharing_config

    if mig_strategy is not None and mig_strategy not in MIG_STRATEGIES:
        raise fail(f"--mig-strategy {mig_strategy}: expected none, single, mixed or auto")
    if sharing_config is None:
        return NvidiaOptions(mig_strategy=mig_strategy or "none", timestamp=timestamp)
    try:
        return load_sharing_config(sharing_config, mig_strategy, timestamp)
    except ValueError as exc:
        raise fail(f"--sharing-config {exc}") from None


def render_table(result: Any) -> str:
    """A per-GPU table for people."""
    from nfd_gpu.model import Gpu

    gpus: tuple[Gpu, ...] = result.snapshot.gpus
    cols = ("ADDRESS", "VENDOR", "PRODUCT", "FAMILY", "MEMORY", "DRIVER", "MODE", "NUMA", "PCIE")
    rows = []
    for g in gpus:
        pcie = ""
        if g.link and g.link.current_gen:
            pcie = f"gen{g.link.current_gen} x{g.link.current_width or '?'}"
        rows.append(
            (
                g.address,
                g.vendor,
                g.product or "",
                g.family or "",
                f"{g.memory_mib} MiB" if g.memory_mib else "",
                g.driver or "none",
                g.mode or "",
                "" if g.numa_node is None else str(g.numa_node),
                pcie,
            )
        )
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [cols, *rows]
    ]
    snap = result.snapshot
    lines.append(
        f"{len(gpus)} GPU(s), {len(snap.nvswitches)} NVSwitch(es), "
        f"{len(snap.pci)} PCI function(s), {len(result.warnings)} warning(s)"
    )
    return "\n".join(lines) + "\n"


def _mount_subcommands() -> None:
    from nfd_gpu.rules.cli import rules_app
    from nfd_gpu.run_cli import register

    app.add_typer(rules_app, name="rules")
    register(app)


_mount_subcommands()


@app.command()
def version() -> None:
    """Print the nfd-gpu version."""
    typer.echo(f"nfd-gpu {__version__}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point: usage errors become one line and exit 2."""
    try:
        rv = app(args=argv, standalone_mode=False)
    except _USAGE_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        where = getattr(ctx, "command_path", None) or "nfd-gpu"
        message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
        if message:
            print(f"{where}: error: {message}", file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        print("nfd-gpu: aborted", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
