"""Load and validate NodeFeatureRule YAML or JSON: a file or a directory of them.

Accepted documents:

- ``apiVersion: nfd.k8s-sigs.io/v1alpha1`` ``kind: NodeFeatureRule`` objects;
- a ``kind: List`` of them;
- a bare mapping with a ``rules:`` list, whose object name is the file name.

Other kinds, such as a ``Kustomization`` next to the rules, are skipped with a warning.
Helm template control lines outside YAML are dropped when the file does not parse as YAML
otherwise. Such a line is a whole line like ``{{- if .Values.x }}``.

Every problem is reported as one ``file: rule: message`` line. The message names the
field: ``matchFeatures[0].matchExpressions.vendor.op``.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nfd_gpu.host import boundedfile
from nfd_gpu.rules import incremental
from nfd_gpu.rules.expressions import ExpressionError, MatchExpression, validate_expression
from nfd_gpu.rules.model import Rule, RuleError, RuleObject, RuleSet, Taint, Term
from nfd_gpu.rules.template import TemplateError
from nfd_gpu.rules.template import parse as parse_template
from nfd_gpu.rules.validate import (
    ValidationError,
    add_namespace,
    check_annotation,
    check_extended_resource,
    check_label,
    check_not_own,
    check_taint,
)
from nfd_gpu.rules.yamldocs import (  # noqa: F401 (load_yaml_documents, YAML_LOADER: API)
    YAML_LOADER,
    compacted,
    load_yaml_documents,
    trim_heap,
)
from nfd_gpu.yamllib import yaml

log = logging.getLogger(__name__)

API_VERSION = "nfd.k8s-sigs.io/v1alpha1"
KIND = "NodeFeatureRule"
RULE_SUFFIXES = (".yaml", ".yml", ".json")

# A rule file larger than this is refused: a NodeFeatureRule object is an API object
# (etcd stores at most 1.5 MiB per object), so a legitimate file is far smaller.
MAX_RULE_FILE = 4 * 1024 * 1024
_RULE_FIELDS = {
    "name",
    "labels",
    "labelsTemplate",
    "annotations",
    "vars",
    "varsTemplate",
    "taints",
    "extendedResources",
    "matchFeatures",
    "matchAny",
}
_TERM_FIELDS = {"feature", "matchExpressions", "matchName"}
_EXPR_FIELDS = {"op", "value", "type"}
_TAINT_FIELDS = {"key", "value", "effect", "timeAdded"}
_HELM_LINE = re.compile(r"^\{\{-?.*-?\}\}\s*$")


class _Problem(Exception):
    def __init__(self, where: str, msg: str):
        super().__init__(f"{where}: {msg}" if where else msg)


def _str_map(v: Any, where: str) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise _Problem(where, "must be a map of strings")
    out: dict[str, str] = {}
    for k, val in v.items():
        if not isinstance(k, str) or not isinstance(val, str):
            raise _Problem(
                f"{where}.{k}", f"value must be a string (got {type(val).__name__}; quote it)"
            )
        out[k] = val
    return out


def _unknown(d: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for k in d:
        if k not in allowed:
            hint = ", ".join(sorted(allowed))
            raise _Problem(f"{where}{'.' if where else ''}{k}", f"unknown field (allowed: {hint})")


def _expression(v: Any, where: str, strict: bool) -> MatchExpression:
    if not isinstance(v, Mapping):
        raise _Problem(where, "must be a map with 'op' (and 'value', 'type')")
    _unknown(v, _EXPR_FIELDS, where)
    op = v.get("op")
    if not isinstance(op, str):
        raise _Problem(f"{where}.op", "missing or not a string")
    raw = v.get("value")
    if raw is None:
        values: tuple[str, ...] = ()
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        values = tuple(raw)
    else:
        raise _Problem(f"{where}.value", "must be a list of strings (quote numbers)")
    vtype = v.get("type", "") or ""
    if not isinstance(vtype, str):
        raise _Problem(f"{where}.type", "must be a string")
    expr = MatchExpression(op, values, vtype)
    if strict:
        try:
            validate_expression(expr)
        except ExpressionError as e:
            raise _Problem(where, str(e)) from None
    return expr


def _terms(v: Any, where: str, strict: bool) -> tuple[Term, ...]:
    if not isinstance(v, list):
        raise _Problem(where, "must be a list of feature terms")
    out: list[Term] = []
    for i, t in enumerate(v):
        w = f"{where}[{i}]"
        if not isinstance(t, Mapping):
            raise _Problem(w, "must be a map with 'feature'")
        _unknown(t, _TERM_FIELDS, w)
        feature = t.get("feature")
        if not isinstance(feature, str) or not feature:
            raise _Problem(f"{w}.feature", "missing or not a string")
        dom, dot, nam = feature.partition(".")
        if strict and (not dot or not dom or not nam):
            raise _Problem(f"{w}.feature", f"{feature!r} is not of the form <domain>.<feature>")
        exprs: tuple[tuple[str, MatchExpression], ...] | None = None
        if "matchExpressions" in t:
            me = t["matchExpressions"]
            if me is None:
                me = {}
            if not isinstance(me, Mapping):
                raise _Problem(f"{w}.matchExpressions", "must be a map of name: {op, value}")
            exprs = tuple(
                (str(k), _expression(e, f"{w}.matchExpressions.{k}", strict)) for k, e in me.items()
            )
        name = None
        if t.get("matchName") is not None:
            name = _expression(t["matchName"], f"{w}.matchName", strict)
        out.append(Term(feature, exprs, name))
    return tuple(out)


def _template(v: Any, where: str, strict: bool) -> Any:
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise _Problem(where, "must be a string")
    try:
        return parse_template(v)
    except TemplateError as e:
        if strict:
            raise _Problem(where, f"template syntax: {e}") from None
        return e


def _check_names(rule: Rule, where: str) -> None:
    for k, v in add_namespace(rule.labels).items():
        try:
            check_label(k, "0" if v.startswith("@") else v)
            check_not_own(k)
        except ValidationError as e:
            raise _Problem(f"{where}labels", str(e)) from None
    for k, v in add_namespace(rule.annotations).items():
        try:
            check_annotation(k, v)
        except ValidationError as e:
            raise _Problem(f"{where}annotations", str(e)) from None
    for k, v in add_namespace(rule.extended_resources).items():
        try:
            check_extended_resource(k, "0" if v.startswith("@") else v)
        except ValidationError as e:
            raise _Problem(f"{where}extendedResources", str(e)) from None
    for i, t in enumerate(rule.taints):
        try:
            check_taint(t.key, t.value, t.effect)
        except ValidationError as e:
            raise _Problem(f"{where}taints[{i}]", str(e)) from None


def parse_rule(d: Any, strict: bool = True) -> Rule:
    """Parse one ``spec.rules[]`` entry; raises ``_Problem`` naming the field."""
    if not isinstance(d, Mapping):
        raise _Problem("", "rule must be a map")
    _unknown(d, _RULE_FIELDS, "")
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise _Problem("name", "missing or empty")
    taints: list[Taint] = []
    raw_taints = d.get("taints") or []
    if not isinstance(raw_taints, list):
        raise _Problem("taints", "must be a list")
    for i, t in enumerate(raw_taints):
        if not isinstance(t, Mapping):
            raise _Problem(f"taints[{i}]", "must be a map with key, value, effect")
        _unknown(t, _TAINT_FIELDS, f"taints[{i}]")
        taints.append(
            Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        )
    match_any: list[tuple[Term, ...]] = []
    raw_any = d.get("matchAny") or []
    if not isinstance(raw_any, list):
        raise _Problem("matchAny", "must be a list of {matchFeatures: [...]}")
    for i, elem in enumerate(raw_any):
        w = f"matchAny[{i}]"
        if not isinstance(elem, Mapping) or "matchFeatures" not in elem:
            raise _Problem(w, "must be a map with 'matchFeatures'")
        _unknown(elem, {"matchFeatures"}, w)
        match_any.append(_terms(elem["matchFeatures"], f"{w}.matchFeatures", strict))
    rule = Rule(
        name=name,
        labels=_str_map(d.get("labels"), "labels"),
        labels_template=_template(d.get("labelsTemplate"), "labelsTemplate", strict),
        vars=_str_map(d.get("vars"), "vars"),
        vars_template=_template(d.get("varsTemplate"), "varsTemplate", strict),
        annotations=_str_map(d.get("annotations"), "annotations"),
        taints=tuple(taints),
        extended_resources=_str_map(d.get("extendedResources"), "extendedResources"),
        match_features=_terms(d.get("matchFeatures") or [], "matchFeatures", strict),
        match_any=tuple(match_any),
    )
    if strict:
        _check_names(rule, "")
    return rule


def _digest(text: str) -> bytes:
    """128 bits of BLAKE2b: a key that stays small for every rule the agent keeps."""
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class RuleCache:
    """The valid rules of a file's last version, by what they were parsed from.

    - So a reload parses only the rules that changed.
    - A ConfigMap edit rewrites every file of it; most rules come back unchanged.
    - With an outline of the last version, only the text that changed is parsed.
    - The key is ``strict`` and a digest of the rule's mapping as ``repr`` writes it.
    - Types are included: ``1``, ``'1'``, ``True`` and ``1.0`` differ.
    - :func:`parse_rule` is a function of nothing else, and its results are immutable.
    """

    def __init__(
        self,
        rules: dict[tuple[bool, bytes], Rule] | None = None,
        last: tuple[bytes, tuple[RuleObject, ...], tuple[str, ...]] | None = None,
        outline: incremental.Outline | None = None,
    ) -> None:
        self.rules = rules or {}
        self.fresh: dict[tuple[bool, bytes], Rule] = {}  # this load's, for the next one
        self.parsed = 0  # rules this load parsed (not found)
        # (digest of the text, its rule objects, its warnings) of the last valid version: a
        # file rewritten with the same text (another key of its ConfigMap edited) is not
        # parsed at all; ``text`` is this load's digest
        self.last = last
        self.text = b""
        # the last valid version's chunks (rules/incremental.py): a reload parses only the
        # middle that changed; ``next_outline`` is this load's, for the next one
        self.outline = outline
        self.next_outline: incremental.Outline | None = None


def _rules_list(
    rules: Any,
    source: str,
    obj: str,
    strict: bool,
    problems: list[str],
    cache: RuleCache | None = None,
    first: int = 0,
) -> list[Rule]:
    if not isinstance(rules, list):
        problems.append(f"{source}: {obj}: spec.rules: must be a list")
        return []
    out: list[Rule] = []
    for i, r in enumerate(rules, first):
        key = (strict, _digest(repr(r))) if cache is not None else None
        if cache is not None and key is not None:
            hit = cache.rules.get(key)
            if hit is not None:
                cache.fresh[key] = hit
                out.append(hit)
                continue
        try:
            rule = parse_rule(r, strict)
        except _Problem as e:
            named = isinstance(r, Mapping) and isinstance(r.get("name"), str) and r.get("name")
            problems.append(f"{source}: {named or f'{obj} rules[{i}]'}: {e}")
            continue
        if cache is not None and key is not None:
            cache.parsed += 1
            cache.fresh[key] = rule
        out.append(rule)
    return out


def rule_objects_from_documents(
    docs: Iterable[Any],
    source: str,
    strict: bool = True,
    problems: list[str] | None = None,
    warnings: list[str] | None = None,
    cache: RuleCache | None = None,
    paths: list[tuple[Any, ...]] | None = None,
    _at: tuple[Any, ...] = (),
) -> list[RuleObject]:
    """Turn parsed YAML documents into rule objects, collecting problem lines.

    - ``cache`` holds the rules of the file's last version, a :class:`RuleCache`.
    - ``paths`` gets where each object's rules list is: document index, keys, ``items`` index.
    """
    where = paths if paths is not None else []
    probs = problems if problems is not None else []
    warns = warnings if warnings is not None else []
    objs: list[RuleObject] = []
    stem = Path(source).stem
    for n, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            probs.append(f"{source}: document {n + 1}: not a NodeFeatureRule object or rules list")
            continue
        kind = doc.get("kind")
        if kind == "List" and isinstance(doc.get("items"), list):
            objs.extend(
                rule_objects_from_documents(
                    doc["items"], source, strict, probs, warns, cache, where, (*_at, n, "items")
                )
            )
            continue
        if kind is None and "apiVersion" not in doc:
            if set(doc) != {"rules"}:
                extra = sorted(set(doc) - {"rules"})
                if "rules" not in doc:
                    probs.append(
                        f"{source}: document {n + 1}: missing 'rules' (or apiVersion/kind)"
                    )
                else:
                    probs.append(f"{source}: document {n + 1}: {extra[0]}: unknown field")
                continue
            where.append((*_at, n, "rules"))
            rules = _rules_list(doc["rules"], source, stem, strict, probs, cache)
            objs.append(RuleObject(stem, source, tuple(rules)))
            continue
        if kind != KIND:
            warns.append(f"{source}: document {n + 1}: skipping kind {kind!r} (not {KIND})")
            continue
        api = doc.get("apiVersion")
        meta = doc.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        label = name if isinstance(name, str) and name else f"document {n + 1}"
        if api != API_VERSION:
            probs.append(f"{source}: {label}: apiVersion: {api!r} is not {API_VERSION!r}")
            continue
        if not isinstance(name, str) or not name:
            probs.append(f"{source}: {label}: metadata.name: missing")
            continue
        for k in doc:
            if k not in ("apiVersion", "kind", "metadata", "spec", "status"):
                probs.append(f"{source}: {name}: {k}: unknown field")
        spec = doc.get("spec")
        if not isinstance(spec, Mapping) or "rules" not in spec:
            probs.append(f"{source}: {name}: spec.rules: missing")
            continue
        for k in spec:
            if k != "rules":
                probs.append(f"{source}: {name}: spec.{k}: unknown field")
        where.append((*_at, n, "spec", "rules"))
        objs.append(
            RuleObject(
                name, source, tuple(_rules_list(spec["rules"], source, name, strict, probs, cache))
            )
        )
    return objs


def _strip_helm(text: str) -> str:
    return "\n".join("" if _HELM_LINE.match(line) else line for line in text.split("\n"))


def _yaml_error(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def read_rule_file(path: Path) -> str:
    """The text of a rule file, by :func:`nfd_gpu.host.boundedfile.read_text`.

    - It is a regular file of at most MAX_RULE_FILE bytes.
    - A FIFO or device is refused, never waited on.
    - Raises RuleError.
    """
    try:
        return boundedfile.read_text(path, MAX_RULE_FILE)
    except boundedfile.FileReadError as e:
        raise RuleError([str(e)]) from None


def parse_documents(
    text: str,
    source: str,
    warnings: list[str],
    *,
    compact: bool = True,
    marks: list[Any] | None = None,
) -> list[Any]:
    """The YAML or JSON documents of one file; raises RuleError when unparseable.

    - With ``compact`` they are rebuilt in one piece by :func:`compacted`.
    - ``marks`` gets each document's :func:`incremental.doc_marks`, none for a Helm template.
    """
    squeeze = compacted if compact else (lambda docs: docs)
    on_root = None
    if marks is not None:
        out = marks

        def on_root(node: Any) -> None:
            out.append(None if node is None else incremental.doc_marks(node, text))

    try:
        return squeeze(load_yaml_documents(text, on_root))
    except yaml.YAMLError as e:
        first = e
    except RecursionError:
        raise RuleError([f"{source}: cannot parse YAML: nested too deeply"]) from None
    if marks is not None:
        marks.clear()
    stripped = _strip_helm(text)
    if stripped != text:
        try:
            docs = squeeze(load_yaml_documents(stripped))
        except (yaml.YAMLError, RecursionError):
            pass
        else:
            warnings.append(f"{source}: Helm template control lines ignored")
            return docs
    raise RuleError([f"{source}: cannot parse YAML: {_yaml_error(first)}"])


def rule_files(path: Path) -> list[Path]:
    """The rule files ``load_rules`` reads for ``path``: sorted, no hidden files.

    - Every entry with a rule suffix counts, whatever its type.
    - A FIFO, a directory or a dangling link named ``*.yaml`` is a problem the reader reports,
      not a file silently skipped.
    - An unlistable directory raises :class:`RuleError`, one line.
    """
    if not path.is_dir():
        return [path]
    try:
        names = list(path.iterdir())
    except OSError as e:
        raise RuleError([f"{path}: cannot list the directory: {e.strerror or e}"]) from None
    return sorted(p for p in names if not p.name.startswith(".") and p.suffix in RULE_SUFFIXES)


def load_rule_file(
    f: Path,
    strict: bool,
    problems: list[str],
    warnings: list[str],
    cache: RuleCache | None = None,
) -> list[RuleObject]:
    """The rule objects of one file; its problems and warnings appended to the lists.

    - ``cache`` holds the rules of the file's last version, a :class:`RuleCache`.
    - Its ``fresh`` holds this version's afterwards, ``next_outline`` its outline when valid.
    - With the last version's outline only the text that changed is parsed, where
      :func:`incremental.splice` can tell.
    - The documents are rebuilt in one piece by :func:`compacted` before the rules that keep
      their strings are made.
    - Not when nearly every rule is one of the cache's: those keep the strings of an earlier
      load.
    """
    mark = (len(problems), len(warnings))
    marks: list[Any] | None = None

    def rules_of(items: list[Any], obj: str, first: int) -> list[Rule]:
        return _rules_list(items, str(f), obj, strict, problems, cache, first)

    try:
        text = read_rule_file(f)
        if cache is not None:
            cache.text = hashlib.blake2b(text.encode(), digest_size=16, key=b"%d" % strict).digest()
            if cache.last is not None and cache.last[0] == cache.text:
                cache.fresh = dict(cache.rules)
                cache.next_outline = cache.outline
                warnings.extend(cache.last[2])
                return list(cache.last[1])
            if cache.outline is not None and cache.outline.strict == strict:
                spliced = incremental.reload(text, str(f), cache, problems, warnings, rules_of)
                if spliced is not None:
                    return spliced
            marks = []
        docs = parse_documents(
            text, str(f), warnings, compact=not (cache and cache.rules), marks=marks
        )
    except RuleError as e:
        problems.extend(e.problems)
        return []
    squeezed = not (cache and cache.rules)
    paths: list[tuple[Any, ...]] = []
    objs = rule_objects_from_documents(docs, str(f), strict, problems, warnings, cache, paths)
    if not squeezed and cache is not None and cache.parsed > _FEW_NEW + len(cache.fresh) // 10:
        # many new rules: made again from a compacted copy (their strings in one piece)
        del problems[mark[0] :], warnings[mark[1] :], paths[:]
        cache.fresh, cache.parsed = {}, 0
        objs = rule_objects_from_documents(compacted(docs), str(f), strict, problems,
                                           warnings, cache, paths)  # fmt: skip
    if cache is not None and marks is not None and len(problems) == mark[0]:
        cache.next_outline = incremental.build_outline(
            text, strict, marks, objs, paths, warnings[mark[1] :]
        )
    del text, docs  # the rules keep what they need
    trim_heap()
    return objs


_FEW_NEW = 16  # new rules of a reload not worth a compacted copy (beyond a tenth of them)


def load_rules(path: str | Path, strict: bool = True, *, tolerant: bool = False) -> RuleSet:
    """Load a rule file or a directory of rule files.

    - ``strict`` validates every expression, template and static name up front: what
      ``rules check`` reports.
    - ``strict=False`` defers those errors to evaluation time, as nfd-master does.

    By default it raises RuleError when a file cannot be read or parsed or any rule is
    invalid. The error has one ``file: rule: message`` line per problem.

    With ``tolerant=True``, as the agent loads, nothing is raised:

    - an unreadable or unparseable file, an invalid object or an invalid rule is skipped;
    - one line per problem is returned in ``RuleSet.problems``;
    - every valid rule is kept.
    """
    p = Path(path)
    try:
        if not p.exists():
            raise RuleError([f"{p}: no such file or directory"])
        files = rule_files(p)
    except RuleError as e:
        if tolerant:
            return RuleSet(problems=tuple(e.problems))
        raise
    problems: list[str] = []
    warnings: list[str] = []
    objs: list[RuleObject] = []
    for f in files:
        objs.extend(load_rule_file(f, strict, problems, warnings))
    for w in warnings:
        log.info("%s", w)
    if problems and not tolerant:
        raise RuleError(problems)
    for prob in problems:
        log.warning("skipping invalid rule input: %s", prob)
    return RuleSet(tuple(objs), tuple(warnings), tuple(problems))


def ruleset_from_documents(
    docs: Iterable[Any], source: str = "<input>", strict: bool = True
) -> RuleSet:
    """Build a RuleSet from already-parsed documents, for tests and tools."""
    problems: list[str] = []
    warnings: list[str] = []
    objs = rule_objects_from_documents(list(docs), source, strict, problems, warnings)
    if problems:
        raise RuleError(problems)
    return RuleSet(tuple(objs), tuple(warnings))
