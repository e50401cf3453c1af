"""``nfd-gpu scan``: one pass over this host or ``--root``, printed."""

# no `from __future__ import annotations`: see cli/__init__.py

import enum
import os
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nfd_gpu.cli.common import SCAN_API_VERSION, check_root, fail, say, say_lines
from nfd_gpu.cli.options import RootOption, scan_option
from nfd_gpu.config.settings import Config, choices, words

if TYPE_CHECKING:
    from nfd_gpu.scan import ScanResult

# ``scan --format dra-preview``: the devices each DRA driver would publish (docs/dra.md)
DRA_PREVIEW_API_VERSION = "nfd-gpu/dra-preview-v1"


class Format(str, enum.Enum):
    labels = "labels"
    json = "json"
    yaml = "yaml"
    table = "table"
    dra_preview = "dra-preview"


def scan(
    root: RootOption = Config.root,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
    ] = Format.labels,
    rules: Annotated[str | None, scan_option("rules")] = None,
    profiles: Annotated[list[str] | None, scan_option("profiles")] = None,
    profile_options: Annotated[list[str] | None, scan_option("profile_options")] = None,
    mig_strategy: Annotated[str | None, scan_option("mig_strategy")] = None,
    sharing_config: Annotated[str | None, scan_option("sharing_config")] = None,
    gfd_timestamp: Annotated[bool, scan_option("gfd_timestamp")] = Config.gfd_timestamp,
    nvml: Annotated[str, scan_option("nvml")] = Config.nvml,
) -> None:
    """Scan this host (or --root) and print labels, features and GPUs."""
    from nfd_gpu.discovery.nvidia.session import NVML_MODES, NvmlRequired  # lazy: scan code
    from nfd_gpu.labels import registry  # lazy: label code, not for --help or version
    from nfd_gpu.labels.options import check  # lazy: as above
    from nfd_gpu.scan import run_scan  # lazy: as above

    check_root(root)
    if rules is not None and not os.path.exists(rules):
        raise fail(f"--rules {rules}: no such file or directory")
    if nvml not in NVML_MODES:
        raise fail(f"--nvml {nvml}: expected {words(NVML_MODES)}")
    # repeatable and comma-separated, as run's --profile (the config's list settings)
    chosen = _items(profiles) or registry.DEFAULT
    bad = registry.unknown(chosen)
    if bad is not None:
        raise fail(f"--profile {bad}: unknown (known: {registry.known()})")
    options = _items(profile_options)
    problem = check(options, chosen)
    if problem:
        raise fail(f"--profile-option: {problem}")
    try:
        nvidia_options = _nvidia_options(
            mig_strategy, sharing_config, int(time.time()) if gfd_timestamp else None
        )
        result = run_scan(
            root,
            rules_path=rules,
            profiles=chosen,
            profile_options=options,
            nvidia_options=nvidia_options,
            nvml=nvml,
            nfd_attributes=fmt in (Format.json, Format.yaml),  # they print the features
        )
    except NvmlRequired as exc:
        raise fail(str(exc), 1) from None
    except Exception as exc:
        _rule_error(exc)
        raise
    _print(result, fmt)


def _items(values: list[str] | None) -> tuple[str, ...]:
    """A repeatable, comma-separated option's values."""
    return tuple(i.strip() for v in values or () for i in v.split(",") if i.strip())


def _rule_error(exc: Exception) -> None:
    """Raise the exit for invalid rules (one line per problem); other errors pass."""
    from nfd_gpu.rules import RuleError  # lazy: the rules engine loads with rules only

    if isinstance(exc, RuleError):
        lines = str(exc).splitlines() or ["invalid rules"]
        for line in lines[:-1]:
            say(f"nfd-gpu: error: {line}", err=True)
        raise fail(lines[-1]) from None


def scan_document(result: "ScanResult") -> dict[str, Any]:
    """The ``--format json|yaml`` document, as nfd_gpu/data/scan-v1.schema.json says."""
    return {
        "apiVersion": SCAN_API_VERSION,
        "labels": dict(sorted(result.labels.items())),
        "features": result.features,
        "gpus": [g for g in result.snapshot.to_dict()["gpus"]],
        "warnings": result.warnings,
    }


def _print(result: "ScanResult", fmt: Format) -> None:
    for w in result.warnings:
        # Warnings go to stderr so `--format labels` stays a clean key=value stream.
        say(f"warning: {w}", err=True)
    if result.errors:
        # an incomplete scan describes this process (out of descriptors, memory), not
        # the host: print no labels a hook could publish
        n = len(result.errors)
        raise fail(f"scan incomplete, no output ({n} error(s)): {result.errors[0]}", 1)
    snap = result.snapshot
    if not snap.gpus:  # else `--format labels` prints nothing at all: say why
        why = f"no GPU found under {snap.root} ({len(snap.pci)} PCI function(s) read)"
        say(f"nfd-gpu: {why}", err=True)
    if fmt is Format.dra_preview:
        import json  # lazy: only the JSON formats need it

        from nfd_gpu.dra.preview import preview_document  # lazy: only this format

        preview = {"apiVersion": DRA_PREVIEW_API_VERSION, **preview_document(snap)}
        typer.echo(json.dumps(preview, indent=2))
        return
    if fmt is Format.labels:
        for k in sorted(result.labels):
            say(f"{k}={result.labels[k]}")
        return
    doc = scan_document(result)
    if fmt is Format.json:
        import json  # lazy: only this format needs it

        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif fmt is Format.yaml:
        from nfd_gpu.yamllib import yaml  # lazy: only this format needs YAML

        typer.echo(yaml.safe_dump(doc, sort_keys=True), nl=False)
    else:
        say_lines(render_table(result))


def _nvidia_options(
    mig_strategy: str | None, sharing_config: str | None, timestamp: int | None = None
) -> Any:
    if mig_strategy is None and sharing_config is None and timestamp is None:
        return None  # the NVIDIA profile's defaults; its code loads only when it is chosen
    from nfd_gpu.config.sharing import nvidia_options  # lazy: label code, reads YAML

    strategies = choices("mig_strategy")
    if mig_strategy is not None and mig_strategy not in strategies:
        raise fail(f"--mig-strategy {mig_strategy}: expected {words(strategies)}")
    try:
        return nvidia_options(mig_strategy, sharing_config, timestamp)
    except ValueError as exc:
        raise fail(f"--sharing-config {exc}") from None


def render_table(result: "ScanResult") -> str:
    """A per-GPU table for people."""
    gpus = result.snapshot.gpus
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
