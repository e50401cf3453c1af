"""Rule execution with nfd-master's exact semantics (docs/rules.md "Semantics").

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
from collections.abc import Callable, Collection, Mapping
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
from nfd_gpu.rules.template.nodes import ActionNode, FieldNode, IdentifierNode, TextNode
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


# What a rule's result depends on: (feature key, the element names its terms can observe,
# None: every element, as for a template or a matchName)
Input = tuple[str, "frozenset[str] | None"]


@dataclass(frozen=True, slots=True)
class _Step:
    """One rule in execution order, with what its result depends on."""

    obj: Any  # RuleObject
    rule: Rule
    inputs: frozenset[Input]  # the features it reads, rule.matched left out
    matched: frozenset[str] | None  # the rule.matched names it reads (None: every name)
    reads_matched: bool


def _counts_only(tmpl: CompiledTemplate) -> bool:
    """A template whose output depends on its data only through how many elements each
    term matched: text and ``{{ len .<domain>[.<feature>] }}`` actions, nothing else (the
    data's keys are the rule's own terms' paths). A template that failed to parse reads
    nothing (it raises whenever the rule matches)."""
    if tmpl is None or isinstance(tmpl, TemplateError):
        return True
    for n in tmpl.root:
        if isinstance(n, TextNode):
            continue
        if not isinstance(n, ActionNode) or n.pipe.decl or len(n.pipe.cmds) != 1:
            return False
        args = n.pipe.cmds[0].args
        if not (
            len(args) == 2
            and isinstance(args[0], IdentifierNode)
            and args[0].name == "len"
            and isinstance(args[1], FieldNode)
            and 1 <= len(args[1].path) <= 2
        ):
            return False
    return True


def _plan(rules: RuleSet) -> list[_Step]:
    steps = []
    for obj in sorted(rules.objects, key=lambda o: o.name):
        for rule in obj.rules:
            # a template sees every element its terms matched, whole: the rule depends on
            # all of those features (unless it only counts them)
            everything = not (
                _counts_only(rule.labels_template) and _counts_only(rule.vars_template)
            )
            inputs: dict[str, set[str] | None] = {}
            for terms in (rule.match_features, *rule.match_any):
                for t in terms:
                    if t.feature_key in inputs and inputs[t.feature_key] is None:
                        continue
                    if everything or t.match_name is not None:
                        inputs[t.feature_key] = None
                        continue
                    names = inputs.setdefault(t.feature_key, set())
                    assert names is not None
                    names.update(n for n, _ in t.match_expressions or ())
            reads_matched = RULE_MATCHED in inputs
            matched = inputs.pop(RULE_MATCHED, None)
            steps.append(
                _Step(
                    obj,
                    rule,
                    frozenset((k, None if v is None else frozenset(v)) for k, v in inputs.items()),
                    None if matched is None else frozenset(matched),
                    reads_matched,
                )
            )
    return steps


_NO_ATTRIBUTES: dict[str, str] = {}


def _fingerprint(features: Features, key: str, names: tuple[str, ...] | None) -> Any:
    """What of feature ``key`` the elements ``names`` (None: all) show a rule: equal
    fingerprints, equal term results (a term reads its feature's sets through
    ``FeatureView.get``, an expression only the element it names)."""
    flags = _elements(features, "flags", key)
    attrs = _elements(features, "attributes", key)
    insts = _elements(features, "instances", key)
    if names is None:
        return repr((flags, attrs, None if insts is None else instance_attributes(insts)))
    return (
        None if flags is None else tuple(n in flags for n in names),
        None if attrs is None else tuple(map(attrs.get, names)),
        None
        if insts is None
        else tuple(tuple(map((i.get("attributes") or _NO_ATTRIBUTES).get, names)) for i in insts),
    )


def _columns(fp: Any, idx: list[int]) -> Any:
    """A names fingerprint (:func:`_fingerprint`) cut to the names at ``idx``."""
    flags, attrs, insts = fp
    return (
        None if flags is None else [flags[j] for j in idx],
        None if attrs is None else [attrs[j] for j in idx],
        None if insts is None else [[row[j] for j in idx] for row in insts],
    )


class RuleMemo:
    """One caller's last evaluation, rule by rule (an agent's: ``scan.RuleOutputs``). On the
    next evaluation of the same rule set a rule whose inputs are unchanged (what of each
    feature its terms can observe, and the ``rule.matched`` names it reads, unchanged by
    the rules before it) is not run again: its last result (or error) is used, so a
    changed pass costs in proportion to what its change reaches. A rule's result depends
    on nothing else (no clock, no environment)."""

    __slots__ = ("_inputs", "_keys", "_next", "_prints", "_results", "_ruleset", "_steps")

    def __init__(self) -> None:
        self._ruleset: RuleSet | None = None
        self._steps: list[_Step] = []
        self._inputs: frozenset[Input] = frozenset()
        # per feature the names any rule's terms read (None: all): one pass over its elements
        self._keys: dict[str, tuple[str, ...] | None] = {}
        self._prints: dict[str, Any] = {}
        self._next: tuple[Features, dict[str, Any]] | None = None  # fingerprint()'s
        self._results: list[RuleResult | RuleEvalError | None] = []

    def _use(self, rules: RuleSet) -> None:
        if rules is not self._ruleset:
            self._ruleset, self._steps, self._prints = rules, _plan(rules), {}
            self._inputs = frozenset(i for st in self._steps for i in st.inputs)
            union: dict[str, set[str] | None] = {}
            for key, names in self._inputs:
                if names is None or (key in union and union[key] is None):
                    union[key] = None
                else:
                    union.setdefault(key, set()).update(names)  # type: ignore[union-attr]
            self._keys = {k: None if v is None else tuple(sorted(v)) for k, v in union.items()}
            self._results = [None] * len(self._steps)

    def _moved(self, inp: Input, prints: dict[str, Any]) -> bool:
        """Whether the elements ``inp`` names changed, from the feature's fingerprints over
        the names all its rules read (this evaluation's and the last one's)."""
        key, names = inp
        order = self._keys[key]
        if names is None or order is None or key not in self._prints:
            return True
        idx = [order.index(n) for n in sorted(names)]
        return bool(_columns(self._prints[key], idx) != _columns(prints[key], idx))

    def _prints_of(self, feats: Features) -> dict[str, Any]:
        if self._next is not None and self._next[0] is feats:
            return self._next[1]
        return {k: _fingerprint(feats, k, names) for k, names in self._keys.items()}

    def fingerprint(self, rules: RuleSet, features: Features) -> Any:
        """All that an evaluation of ``rules`` reads of ``features``: what the rules' terms
        can observe and the attribute features (``rule.matched`` given with the features,
        the ``@`` values of the output); equal fingerprints, equal output. Far less than the
        whole features on a host with thousands of PCI functions."""
        self._use(rules)
        self._next = None
        prints = self._prints_of(features)
        self._next = (features, prints)
        return (tuple(prints.values()), repr(features.get("attributes")))

    def run(self, rules: RuleSet, feats: Features, errors: list[tuple[str, str]]) -> _Collected:
        self._use(rules)
        prints = self._prints_of(feats)
        self._next = None
        moved = {k for k, fp in prints.items() if self._prints.get(k, self) != fp}
        changed = {i for i in self._inputs if i[0] in moved and self._moved(i, prints)}
        self._prints = prints
        # rule.matched names whose value may differ from the last evaluation's at this point
        dirty: set[str] = set()
        if RULE_MATCHED in feats.get("attributes", {}):
            dirty.add("")  # given with the features: no rule.matched result is reused
        out = _Collected()
        view = FeatureView(feats)
        results = self._results
        attrs = feats["attributes"]
        matched: dict[str, str] | None = None  # rule.matched's elements, once it exists
        for n, st in enumerate(self._steps):
            last = results[n]
            res: RuleResult | RuleEvalError | None = last
            if (
                last is None
                or (changed and not changed.isdisjoint(st.inputs))
                or (
                    st.reads_matched
                    and dirty
                    and (st.matched is None or "" in dirty or not dirty.isdisjoint(st.matched))
                )
            ):
                try:
                    res = execute_rule(st.rule, view, fail_fast=True)
                except RuleEvalError as e:
                    res = e
                results[n] = res
                if last is not None and not _same(last, res):
                    for r in (last, res):
                        if type(r) is RuleResult:
                            dirty.update(r.labels, r.vars)
            if type(res) is not RuleResult:  # an error: the rule is skipped
                _apply(st, res, feats, out, errors)
                continue
            # _apply's feedback and collection, inline (every rule, every changed pass)
            if matched is None:
                _insert_matched(feats, res.labels)
                _insert_matched(feats, res.vars)
                matched = attrs[RULE_MATCHED]["elements"]
            else:
                if res.labels:
                    matched.update(res.labels)
                if res.vars:
                    matched.update(res.vars)
            if res.matched:
                out.add(st.rule.name, res)
        return out


def _same(a: RuleResult | RuleEvalError, b: RuleResult | RuleEvalError) -> bool:
    if isinstance(a, RuleEvalError) or isinstance(b, RuleEvalError):
        return isinstance(a, RuleEvalError) and isinstance(b, RuleEvalError)  # both empty
    return a == b


def _apply(
    st: _Step,
    res: RuleResult | RuleEvalError | None,
    feats: Features,
    out: _Collected,
    errors: list[tuple[str, str]],
) -> None:
    """One rule's result fed back (``rule.matched``) and collected; an error reported."""
    if isinstance(res, RuleEvalError):
        log.warning("rule %r (%s) failed: %s", st.rule.name, st.obj.source, res)
        errors.append((st.rule.name, str(res)))
        return
    assert res is not None
    _insert_matched(feats, res.labels)
    _insert_matched(feats, res.vars)
    if res.matched:
        out.add(st.rule.name, res)


def _run_rules(
    rules: RuleSet, feats: Features, errors: list[tuple[str, str]], memo: RuleMemo | None = None
) -> _Collected:
    """Rule objects sorted by name, rules in list order; each rule's labels and vars are
    fed back as ``rule.matched`` before the next one runs; a failing rule is skipped.
    ``memo``: the caller's last evaluation (:class:`RuleMemo`), rules whose inputs are
    unchanged not run again."""
    if memo is not None:
        return memo.run(rules, feats, errors)
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
    """nfd-master's output filter for one kind: auto-prefix the names, resolve ``@``
    values (when ``feats`` is given), drop (and report) what ``check`` rejects."""
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
    memo: RuleMemo | None = None,
) -> RuleOutput:
    """Evaluate every rule like nfd-master does for one node; ``own_ns``: the namespace of
    nfd-gpu's own labels, whose health and counts no rule may write (an error naming the
    rule; nfd-master itself has no such check). ``memo``: the caller's
    :class:`RuleMemo`, reusing the results of rules whose inputs did not change since its
    last evaluation (the same output as without it)."""
    feats = _working_copy(features)
    errors: list[tuple[str, str]] = []
    got = _run_rules(rules, feats, errors, memo)
    extra_ns = tuple(extra_label_ns)

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

    return RuleOutput(out_labels, out_ann, out_taints, out_er, got.vars, errors)
