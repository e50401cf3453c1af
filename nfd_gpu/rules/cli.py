"""``nfd-gpu rules``: check rule files and dry-run them against features.

Mounted by ``nfd_gpu/cli.py`` as ``app.add_typer(rules_app, name="rules")``;
also runnable as ``python -m nfd_gpu.rules.cli``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from nfd_gpu.features import Features

if TYPE_CHECKING:
    from nfd_gpu.rules.model import RuleSet

# The engine, loader and YAML are imported inside the commands: this module is
# imported by every `nfd-gpu` invocation to build the CLI, and start-up time counts.

log = logging.getLogger(__name__)

rules_app = typer.Typer(
    help="Check NodeFeatureRule files and dry-run them against node features.",
    no_args_is_help=True,
    add_completion=False,
)

EXIT_INPUT = 2


class OutputFormat(str, Enum):
    json = "json"
    labels = "labels"


class FeatureFileError(ValueError):
    """A features file that cannot be read or is not in NodeFeature shape."""


def _fail(msg: str) -> typer.Exit:
    typer.echo(msg, err=True)
    return typer.Exit(EXIT_INPUT)


def _load(path: Path) -> RuleSet:
    from nfd_gpu.rules.loader import load_rules
    from nfd_gpu.rules.model import RuleError

    try:
        rs = load_rules(path)
    except RuleError as e:
        for line in e.problems:
            typer.echo(line, err=True)
        raise typer.Exit(EXIT_INPUT) from None
    for w in rs.warnings:
        typer.echo(f"warning: {w}", err=True)
    return rs


def features_from_document(doc: Any, source: str) -> Features:
    """Accept a NodeFeature object, its ``spec``, or its ``spec.features``."""
    if not isinstance(doc, Mapping):
        raise FeatureFileError(f"{source}: not a NodeFeature object or features map")
    if doc.get("kind") == "NodeFeature" or "spec" in doc:
        spec = doc.get("spec")
        if not isinstance(spec, Mapping):
            raise FeatureFileError(f"{source}: spec: missing or not a map")
        doc = spec.get("features") or {}
    elif "features" in doc and not {"flags", "attributes", "instances"} & set(doc):
        doc = doc["features"] or {}
    if not isinstance(doc, Mapping):
        raise FeatureFileError(f"{source}: features: not a map")
    unknown = set(doc) - {"flags", "attributes", "instances"}
    if unknown:
        raise FeatureFileError(f"{source}: features.{sorted(unknown)[0]}: unknown field")
    out: Features = {"flags": {}, "attributes": {}, "instances": {}}
    for kind in ("flags", "attributes", "instances"):
        sets = doc.get(kind) or {}
        if not isinstance(sets, Mapping):
            raise FeatureFileError(f"{source}: features.{kind}: not a map")
        for name, fs in sets.items():
            where = f"{source}: features.{kind}.{name}"
            elems = fs.get("elements") if isinstance(fs, Mapping) else None
            if kind == "instances":
                if not isinstance(elems, list):
                    raise FeatureFileError(f"{where}.elements: must be a list")
                insts = []
                for i, inst in enumerate(elems):
                    attrs = inst.get("attributes") if isinstance(inst, Mapping) else None
                    if not isinstance(attrs, Mapping):
                        raise FeatureFileError(f"{where}.elements[{i}].attributes: must be a map")
                    insts.append({"attributes": {str(k): _s(v) for k, v in attrs.items()}})
                out[kind][str(name)] = {"elements": insts}
            else:
                if elems is None:
                    elems = {}
                if not isinstance(elems, Mapping):
                    raise FeatureFileError(f"{where}.elements: must be a map")
                conv = {str(k): ({} if kind == "flags" else _s(v)) for k, v in elems.items()}
                out[kind][str(name)] = {"elements": conv}
    return out


def _s(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def read_features_file(path: Path) -> Features:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FeatureFileError(f"{path}: cannot read: {e}") from None
    try:
        import yaml

        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise FeatureFileError(f"{path}: cannot parse YAML/JSON{where}") from None
    if len(docs) != 1:
        raise FeatureFileError(f"{path}: expected one NodeFeature document, found {len(docs)}")
    return features_from_document(docs[0], str(path))


def _scan_features(root: Path) -> Features:
    try:
        from nfd_gpu.scan import run_scan  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise FeatureFileError(
            f"{root}: --root needs nfd_gpu.scan, which is not available in this build; "
            "use --features FILE"
        ) from None
    if not root.is_dir():
        raise FeatureFileError(f"{root}: not a directory")
    feats: Features = run_scan(root).features
    return feats


@rules_app.command("check")
def check(
    path: Path = typer.Argument(..., help="Rule file or directory of rule files."),
) -> None:
    """Validate rule files: exit 0 when valid, 2 with `file: rule: message` lines."""
    rs = _load(path)
    typer.echo(f"{path}: OK ({len(rs.objects)} objects, {rs.rule_count} rules)")


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
    try:
        feats = read_features_file(features) if features is not None else _scan_features(root)  # type: ignore[arg-type]
    except FeatureFileError as e:
        raise _fail(str(e)) from None
    from nfd_gpu.rules.engine import evaluate

    out = evaluate(rs, feats)
    for rule, msg in out.errors:
        typer.echo(f"rule {rule}: {msg}", err=True)
    if fmt is OutputFormat.labels:
        for k, v in sorted(out.labels.items()):
            typer.echo(f"{k}={v}")
    else:
        typer.echo(json.dumps(out.to_json(), indent=2))


if __name__ == "__main__":  # pragma: no cover
    rules_app()
