"""Rule execution with nfd-master's exact semantics (``reference/nfd.md`` §3).

``execute_rule`` is NFD's ``nodefeaturerule.Execute``; ``evaluate`` is
nfd-master's ``processNodeFeatureRule`` plus its output filtering: rule
objects sorted by name, rules in list order, ``failFast``, a failing rule is
skipped, every successful rule's labels and vars are fed back as the attribute
feature ``rule.matched``; afterwards names are auto-prefixed, ``@`` dynamic
values resolved and everything validated (rejected items are reported in
``errors`` and dropped; the rest still applies).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from nfd_gpu.features import Features
from nfd_gpu.rules.expressions import (
    ExpressionError,
    MatchedElement,
    instance_attributes,
    match_multi,
    match_names_multi,
)
from nfd_gpu.rules.model import CompiledTemplate, Rule, RuleSet, Term
from nfd_gpu.rules.template import TemplateError, expand_map
from nfd_gpu.rules.validate import (
    ValidationError,
    add_namespace,
    check_annotation,
    check_extended_resource,
    check_label,
    check_taint,
)

log = logging.getLogger(__name__)

RULE_MATCHED = "rule.matched"
TemplateData = dict[str, dict[str, list[MatchedElement]]]


class RuleEvalError(RuntimeError):
    """A rule that errored while being evaluated (NFD drops that rule)."""


@dataclass(frozen=True, slots=True)
class RuleResult:
    """Output of one rule. ``matched`` False means all maps are empty."""

    matched: bool
    labels: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class RuleOutput:
    """What nfd-master would apply to the node for these rules and features."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    extended_resources: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": dict(sorted(self.labels.items())),
            "annotations": dict(sorted(self.annotations.items())),
            "taints": list(self.taints),
            "extendedResources": dict(sorted(self.extended_resources.items())),
            "vars": dict(sorted(self.vars.items())),
            "errors": [{"rule": r, "message": m} for r, m in self.errors],
        }


# ---------------------------------------------------------------- matching


FeatureSets = tuple[Any, Any, "list[Mapping[str, str]] | None"]


class FeatureView:
    """Per-evaluation lookup of one feature's flags, attributes and instance
    attribute maps. Only ``rule.matched`` (attributes) changes during an
    evaluation; it is never cached."""

    __slots__ = ("_cache", "features", "terms")

    def __init__(self, features: Features):
        self.features = features
        self._cache: dict[str, FeatureSets] = {}
        # Term.term_id -> (term matched, matched elements) for fail-fast matching
        # of features other than rule.matched: the same result for equal terms
        self.terms: dict[int, tuple[bool, list[MatchedElement]]] = {}

    def get(self, key: str) -> FeatureSets:
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        f = self.features
        flags = _elements(f, "flags", key)
        attrs = _elements(f, "attributes", key)
        insts = _elements(f, "instances", key)
        sets: FeatureSets = (
            flags,
            attrs,
            None if insts is None else instance_attributes(insts),
        )
        if key != RULE_MATCHED:
            self._cache[key] = sets
        return sets


def _elements(features: Features, kind: str, name: str) -> Any:
    fs = features.get(kind, {}).get(name)
    if fs is None:
        return None
    elems = fs.get("elements")
    if elems is None:
        return {} if kind != "instances" else []
    return elems


def evaluate_feature_matcher(
    terms: tuple[Term, ...], features: Features | FeatureView, fail_fast: bool = True
) -> tuple[bool, TemplateData | None]:
    """NFD ``evaluateFeatureMatcher``: logical AND over the terms."""
    view = features if isinstance(features, FeatureView) else FeatureView(features)
    is_match = True
    data: TemplateData = {}
    for term in terms:
        dom, nam = term.template_path
        dom_data = data.get(dom)
        if dom_data is None:
            dom_data = data[dom] = {}
        hit = view.terms.get(term.term_id) if fail_fast else None
        if hit is not None:
            term_match, cached = hit
            elems = list(cached)
        else:
            key = term.feature_key
            flags, attrs, insts = view.get(key)
            if flags is None and attrs is None and insts is None:
                if fail_fast:
                    return False, None
                is_match = False
                continue
            term_match = True
            elems = []
            if term.compiled is not None:
                term_match, elems = match_multi(term.compiled, flags, attrs, insts, fail_fast)
            if term_match and term.match_name is not None:
                term_match, more = match_names_multi(term.match_name, flags, attrs, insts)
                elems = elems + more
            if fail_fast and key != RULE_MATCHED:
                view.terms[term.term_id] = (term_match, list(elems))
        prev = dom_data.get(nam)
        if prev is None:
            dom_data[nam] = elems
        else:
            prev.extend(elems)
        if not term_match:
            if fail_fast:
                return False, data
            is_match = False
    return is_match, data


def _run_template(
    tmpl: CompiledTemplate, data: TemplateData, out: dict[str, str], what: str
) -> None:
    if tmpl is None:
        return
    if isinstance(tmpl, TemplateError):
        raise RuleEvalError(f"failed to parse {what}: {tmpl}")
    try:
        out.update(expand_map(tmpl, data))
    except TemplateError as e:
        raise RuleEvalError(f"failed to expand {what}: {e}") from None


def execute_rule(
    rule: Rule, features: Features | FeatureView, fail_fast: bool = True
) -> RuleResult:
    """NFD ``Execute``: matchAny (OR) then matchFeatures (AND); templates run on
    the matched elements; static ``labels``/``vars`` override template output."""
    if not isinstance(features, FeatureView):
        features = FeatureView(features)
    labels: dict[str, str] = {}
    vars_: dict[str, str] = {}
    has_tmpl = rule.labels_template is not None or rule.vars_template is not None
    try:
        if rule.match_any:
            any_match = False
            for terms in rule.match_any:
                ok, data = evaluate_feature_matcher(terms, features, fail_fast)
                if not ok:
                    continue
                any_match = True
                if not has_tmpl and fail_fast:
                    break
                assert data is not None
                _run_template(rule.labels_template, data, labels, "labelsTemplate")
                _run_template(rule.vars_template, data, vars_, "varsTemplate")
            if not any_match and fail_fast:
                return RuleResult(False)
        if rule.match_features:
            ok, data = evaluate_feature_matcher(rule.match_features, features, fail_fast)
            if not ok:
                return RuleResult(False)
            assert data is not None
            _run_template(rule.labels_template, data, labels, "labelsTemplate")
            _run_template(rule.vars_template, data, vars_, "varsTemplate")
    except ExpressionError as e:
        raise RuleEvalError(str(e)) from None
    labels.update(rule.labels)
    vars_.update(rule.vars)
    return RuleResult(
        True,
        labels,
        vars_,
        dict(rule.annotations) if rule.annotations else {},
        dict(rule.extended_resources) if rule.extended_resources else {},
        tuple(t.as_dict() for t in rule.taints) if rule.taints else (),
    )


# ------------------------------------------------------------ nfd-master


def _working_copy(features: Features) -> Features:
    """Shallow copy so rule.matched feedback never touches the caller's dict."""
    attrs = dict(features.get("attributes") or {})
    if RULE_MATCHED in attrs:
        attrs[RULE_MATCHED] = {"elements": dict(attrs[RULE_MATCHED].get("elements") or {})}
    return {
        "flags": features.get("flags") or {},
        "attributes": attrs,
        "instances": features.get("instances") or {},
    }


def _insert_matched(features: Features, values: Mapping[str, str]) -> None:
    attrs = features["attributes"]
    fs = attrs.get(RULE_MATCHED)
    if fs is None:
        attrs[RULE_MATCHED] = {"elements": dict(values)}
    else:
        fs["elements"].update(values)


def resolve_dynamic(value: str, features: Features) -> str:
    """nfd-master ``getDynamicValue``: ``@domain.feature.element`` from an attribute feature."""
    parts = value[1:].split(".", 2)
    if len(parts) != 3:
        raise ValidationError(f"value {value} is not in the form of '@domain.feature.element'")
    feature, element = parts[0] + "." + parts[1], parts[2]
    fs = features.get("attributes", {}).get(feature)
    if fs is None:
        raise ValidationError(f"feature {feature} not found")
    elems = fs.get("elements") or {}
    if element not in elems:
        raise ValidationError(f"element {element} not found on feature {feature}")
    return str(elems[element])


@lru_cache(maxsize=65536)
def _label_problem(name: str, value: str, extra_ns: tuple[str, ...]) -> str | None:
    try:
        check_label(name, value, extra_ns=extra_ns)
    except ValidationError as e:
        return str(e)
    return None


def evaluate(
    rules: RuleSet,
    features: Features,
    *,
    extra_label_ns: Collection[str] = (),
) -> RuleOutput:
    """Evaluate every rule like nfd-master does for one node."""
    feats = _working_copy(features)
    labels: dict[str, str] = {}
    label_src: dict[str, str] = {}
    annotations: dict[str, str] = {}
    ann_src: dict[str, str] = {}
    ers: dict[str, str] = {}
    er_src: dict[str, str] = {}
    taints: list[tuple[str, dict[str, str]]] = []
    vars_: dict[str, str] = {}
    errors: list[tuple[str, str]] = []

    view = FeatureView(feats)
    for obj in sorted(rules.objects, key=lambda o: o.name):
        for rule in obj.rules:
            try:
                res = execute_rule(rule, view, fail_fast=True)
            except RuleEvalError as e:
                log.warning("rule %r (%s) failed: %s", rule.name, obj.source, e)
                errors.append((rule.name, str(e)))
                continue
            _insert_matched(feats, res.labels)
            _insert_matched(feats, res.vars)
            if not res.matched:
                continue
            for src, dst, srcmap in (
                (res.labels, labels, label_src),
                (res.annotations, annotations, ann_src),
                (res.extended_resources, ers, er_src),
            ):
                if src:
                    dst.update(src)
                    srcmap.update(dict.fromkeys(src, rule.name))
            if res.vars:
                vars_.update(res.vars)
            if res.taints:
                taints.extend((rule.name, t) for t in res.taints)

    out_labels: dict[str, str] = {}
    prefixed = add_namespace(labels)
    for k, v in prefixed.items():
        rule_name = label_src.get(k) or label_src.get(k.rpartition("/")[2], "?")
        try:
            if v.startswith("@"):
                v = resolve_dynamic(v, feats)
            problem = _label_problem(k, v, tuple(extra_label_ns))
            if problem is not None:
                raise ValidationError(problem)
        except ValidationError as e:
            errors.append((rule_name, f"ignoring label {k}={v}: {e}"))
            continue
        out_labels[k] = v

    out_ann: dict[str, str] = {}
    for k, v in add_namespace(annotations).items():
        rule_name = ann_src.get(k) or ann_src.get(k.rpartition("/")[2], "?")
        try:
            check_annotation(k, v)
        except ValidationError as e:
            errors.append((rule_name, f"ignoring annotation {k}: {e}"))
            continue
        out_ann[k] = v

    out_er: dict[str, str] = {}
    for k, v in add_namespace(ers).items():
        rule_name = er_src.get(k) or er_src.get(k.rpartition("/")[2], "?")
        try:
            if v.startswith("@"):
                v = resolve_dynamic(v, feats)
            check_extended_resource(k, v)
        except ValidationError as e:
            errors.append((rule_name, f"ignoring extended resource {k}: {e}"))
            continue
        out_er[k] = v

    out_taints: list[dict[str, str]] = []
    for rule_name, t in taints:
        try:
            check_taint(t["key"], t.get("value", ""), t["effect"])
        except ValidationError as e:
            errors.append((rule_name, f"ignoring taint {t['key']}: {e}"))
            continue
        out_taints.append(t)

    return RuleOutput(out_labels, out_ann, out_taints, out_er, vars_, errors)
