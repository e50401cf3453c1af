"""``nfd-gpu rules``: check rule files and dry-run them against features."""

# no `from __future__ import annotations`: see cli/__init__.py

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from nfd_gpu.cli.common import say

if TYPE_CHECKING:
    from nfd_gpu.features import Features
    from nfd_gpu.rules.model import RuleSet

rules_app = typer.Typer(
    help="Check NodeFeatureRule files and dry-run them against node features.",
    no_args_is_help=True,
    add_completion=False,
)

EXIT_INPUT = 2


class OutputFormat(str, Enum):
    json = "json"
    labels = "labels"


def _fail(msg: str) -> typer.Exit:
    say(msg, err=True)
    return typer.Exit(EXIT_INPUT)


def _load(path: Path) -> "RuleSet":
    from nfd_gpu.rules.loader import load_rules  # lazy: the rules engine, not for --help
    from nfd_gpu.rules.model import RuleError  # lazy: as above

    try:
        rs = load_rules(path)
    except RuleError as e:
        for line in e.problems:
            say(line, err=True)
        raise typer.Exit(EXIT_INPUT) from None
    for w in rs.warnings:
        say(f"warning: {w}", err=True)
    return rs


def _features(features: Path | None, root: Path | None) -> "Features":
    """The features of ``--features FILE`` or of a scan of ``--root DIR``: exactly one."""
    from nfd_gpu.rules.features_doc import FeatureFileError, read_features_file  # lazy: YAML

    if features is not None:
        try:
            return read_features_file(features)
        except FeatureFileError as e:
            raise _fail(str(e)) from None
    assert root is not None
    if not root.is_dir():
        raise _fail(f"{root}: not a directory")
    from nfd_gpu.scan import run_scan  # lazy: discovery and labels, only for --root

    feats: Features = run_scan(root).features
    return feats


@rules_app.command("check")
def check(
    path: Path = typer.Argument(..., help="Rule file or directory of rule files."),
) -> None:
    """Validate rule files: exit 0 when valid, 2 with `file: rule: message` lines."""
    rs = _load(path)
    say(f"{path}: OK ({len(rs.objects)} objects, {rs.rule_count} rules)")


@rules_app.command("test")
def test(
    rules: Path = typer.Argument(..., help="Rule file or directory of rule files."),
    features: Path | None = typer.Option(
        None, "--features", help="NodeFeature object (YAML/JSON) or its spec.features."
    ),
    root: Path | None = typer.Option(
        None, "--root", help="Host root to scan for features (e.g. a captured node)."
    ),
    fmt: OutputFormat = typer.Option(OutputFormat.json, "--format", help="Output format."),
) -> None:
    """Dry-run RULES offline: print the labels, annotations, taints, extended
    resources and vars nfd-master would produce. Exit 0 when evaluation ran
    (rule errors are listed in `errors` and on stderr), 2 on unreadable input."""
    if (features is None) == (root is None):
        raise _fail("rules test: give exactly one of --features FILE or --root DIR")
    rs = _load(rules)
    feats = _features(features, root)
    from nfd_gpu.rules.engine import evaluate  # lazy: the rules engine, not for --help
    from nfd_gpu.rules.validate import OWN_NS  # lazy: as above

    out = evaluate(rs, feats, own_ns=OWN_NS)  # nfd-gpu's own labels refused, as by the agent
    for rule, msg in out.errors:
        say(f"rule {rule}: {msg}", err=True)
    if fmt is OutputFormat.labels:
        for k, v in sorted(out.labels.items()):
            say(f"{k}={v}")
    else:
        import json  # lazy: only this format needs it

        typer.echo(json.dumps(out.to_json(), indent=2))
