"""Rule execution with nfd-master's exact semantics, as docs/rules.md "Semantics" says.

- ``execute_rule`` is NFD's ``nodefeaturerule.Execute``.
- ``evaluate`` is nfd-master's ``processNodeFeatureRule`` plus its output filtering.

``evaluate``:

- rule objects sorted by name, rules in list order, ``failFast``;
- a failing rule is skipped;
- every successful rule's labels and vars are fed back as the attribute feature
  ``rule.matched``;
- afterwards names are auto-prefixed, ``@`` dynamic values resolved and everything
  validated;
- rejected items are reported in ``errors`` and dropped; the rest still applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from nfd_gpu.features import Features
from nfd_gpu.record import Record, record
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
    check_not_own,
    check_taint,
)

log = logging.getLogger(__name__)

RULE_MATCHED = "rule.matched"
TemplateData = dict[str, dict[str, list[MatchedElement]]]


class RuleEvalError(RuntimeError):
    """A rule that errored while being evaluated; NFD drops that rule."""


@record()
class RuleResult(Record):
    """Output of one rule. ``matched`` False means all maps are empty."""

    matched: bool
    labels: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()


@record(slots=False)
class RuleOutput(Record):
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
    """Per-evaluation lookup of one feature's flags, attributes and instance attribute maps.

    Only ``rule.matched``, an attribute feature, changes during an evaluation; it is never
    cached.
    """

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
    """NFD ``Execute``: matchAny, an OR, then matchFeatures, an AND.

    - Templates run on the matched elements.
    - Static ``labels`` and ``vars`` override template output.
    """
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


@dataclass
class _Collected:
    """What the matching rules produced, before nfd-master's filtering. For labels,
    annotations and extended resources, ``src`` names the rule each key came from."""

    labels: dict[str, str] = field(default_factory=dict)
    label_src: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    ann_src: dict[str, str] = field(default_factory=dict)
    ers: dict[str, str] = field(default_factory=dict)
    er_src: dict[str, str] = field(default_factory=dict)
    taints: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)

    def add(self, rule_name: str, res: RuleResult) -> None:
        if res.labels:
            self.labels.update(res.labels)
            self.label_src.update(dict.fromkeys(res.labels, rule_name))
        if res.annotations:
            self.annotations.update(res.annotations)
            self.ann_src.update(dict.fromkeys(res.annotations, rule_name))
        if res.extended_resources:
            self.ers.update(res.extended_resources)
            self.er_src.update(dict.fromkeys(res.extended_resources, rule_name))
        if res.vars:
            self.vars.update(res.vars)
        if res.taints:
            self.taints.extend((rule_name, t) for t in res.taints)


def _run_rules(
    rules: RuleSet, feats: Features, errors: list[tuple[str, str]], memo: Any = None
) -> _Collected:
    """Run the rules: objects sorted by name, rules in list order.

    - Each rule's labels and vars are fed back as ``rule.matched`` before the next one runs.
    - A failing rule is skipped.
    - ``memo`` is the caller's last evaluation, a :class:`~nfd_gpu.rules.memo.RuleMemo`.
      Rules whose inputs are unchanged are not run again.
    """
    if memo is not None:
        return memo.run(rules, feats, errors)  # type: ignore[no-any-return]
    out = _Collected()
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
            if res.matched:
                out.add(rule.name, res)
    return out


def _filtered(
    what: str,
    items: dict[str, str],
    src: dict[str, str],
    check: Callable[[str, str], None],
    errors: list[tuple[str, str]],
    feats: Features | None,
) -> dict[str, str]:
    """nfd-master's output filter for one kind.

    - Auto-prefix the names.
    - Resolve ``@`` values, when ``feats`` is given.
    - Drop and report what ``check`` rejects.
    """
    out: dict[str, str] = {}
    for k, v in add_namespace(items).items():
        rule_name = src.get(k) or src.get(k.rpartition("/")[2], "?")
        try:
            if feats is not None and v.startswith("@"):
                v = resolve_dynamic(v, feats)
            check(k, v)
        except ValidationError as e:
            shown = f"{k}={v}" if what == "label" else k
            errors.append((rule_name, f"ignoring {what} {shown}: {e}"))
            continue
        out[k] = v
    return out


def evaluate(
    rules: RuleSet,
    features: Features,
    *,
    extra_label_ns: Collection[str] = (),
    own_ns: str | None = None,
    memo: Any = None,
) -> RuleOutput:
    """Evaluate every rule like nfd-master does for one node.

    - ``own_ns``: the namespace of nfd-gpu's own labels. No rule may write their health and
      counts: an error names the rule. nfd-master itself has no such check.
    - ``memo``: the caller's :class:`~nfd_gpu.rules.memo.RuleMemo`. It reuses the results of
      rules whose inputs did not change since its last evaluation. The output is the same as
      without it.
    """
    feats = _working_copy(features)
    if memo is not None:
        memo.copied(features, feats)  # the prints its fingerprint() took, for its run
    errors: list[tuple[str, str]] = []
    got = _run_rules(rules, feats, errors, memo)
    extra_ns = tuple(extra_label_ns)
    key = (extra_ns, own_ns)
    last = memo.filtered if memo is not None else None
    if memo is not None and memo.reused and last is not None and last[0] == key:
        # the rules' output is the last one, with no ``@`` value: so is its filtering
        labels, ann, taints, ers, problems = last[1]
        errors.extend(problems)
        return RuleOutput(dict(labels), dict(ann), list(taints), dict(ers), got.vars, errors)
    first = len(errors)

    def check_label_cached(k: str, v: str) -> None:
        problem = _label_problem(k, v, extra_ns)
        if problem is not None:
            raise ValidationError(problem)
        if own_ns is not None:
            check_not_own(k, own_ns)

    out_labels = _filtered("label", got.labels, got.label_src, check_label_cached, errors, feats)
    out_ann = _filtered("annotation", got.annotations, got.ann_src, check_annotation, errors, None)
    out_er = _filtered(
        "extended resource", got.ers, got.er_src, check_extended_resource, errors, feats
    )

    out_taints: list[dict[str, str]] = []
    for rule_name, t in got.taints:
        try:
            check_taint(t["key"], t.get("value", ""), t["effect"])
        except ValidationError as e:
            errors.append((rule_name, f"ignoring taint {t['key']}: {e}"))
            continue
        out_taints.append(t)

    if memo is not None:
        dynamic = any(v.startswith("@") for d in (got.labels, got.ers) for v in d.values())
        filtered = (dict(out_labels), dict(out_ann), list(out_taints), dict(out_er), errors[first:])
        memo.filtered = None if dynamic else (key, filtered)
    return RuleOutput(out_labels, out_ann, out_taints, out_er, got.vars, errors)
