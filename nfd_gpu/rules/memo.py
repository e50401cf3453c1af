"""Per-rule reuse between evaluations, :class:`RuleMemo`.

After a change only the rules it reaches run again. The output is a full evaluation's,
as rules/engine.py makes it.
"""

from __future__ import annotations

from typing import Any

from nfd_gpu.features import Features
from nfd_gpu.record import Record, record
from nfd_gpu.rules import engine
from nfd_gpu.rules.engine import (
    RULE_MATCHED,
    FeatureView,
    RuleEvalError,
    RuleResult,
    _Collected,
    _elements,
    _insert_matched,
)
from nfd_gpu.rules.expressions import instance_attributes
from nfd_gpu.rules.model import CompiledTemplate, Rule, RuleSet
from nfd_gpu.rules.template import TemplateError
from nfd_gpu.rules.template.nodes import ActionNode, FieldNode, IdentifierNode, TextNode

# What a rule's result depends on: (feature key, the element names its terms can observe,
# None: every element, as for a template or a matchName)
Input = tuple[str, "frozenset[str] | None"]


@record()
class _Step(Record):
    """One rule in execution order, with what its result depends on."""

    obj: Any  # RuleObject
    rule: Rule
    inputs: frozenset[Input]  # the features it reads, rule.matched left out
    matched: frozenset[str] | None  # the rule.matched names it reads (None: every name)
    reads_matched: bool


def _counts_only(tmpl: CompiledTemplate) -> bool:
    """A template whose output depends on its data only through how many elements each term matched.

    - It holds text and ``{{ len .<domain>[.<feature>] }}`` actions, nothing else.
    - The data's keys are the rule's own terms' paths.
    - A template that failed to parse reads nothing: it raises whenever the rule matches.
    """
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
    """What of feature ``key`` the elements ``names`` show a rule; ``names`` None means all.

    - Equal fingerprints, equal term results.
    - A term reads its feature's sets through ``FeatureView.get``.
    - An expression reads only the element it names.
    """
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
    """A names fingerprint of :func:`_fingerprint`, cut to the names at ``idx``."""
    flags, attrs, insts = fp
    return (
        None if flags is None else [flags[j] for j in idx],
        None if attrs is None else [attrs[j] for j in idx],
        None if insts is None else [[row[j] for j in idx] for row in insts],
    )


class RuleMemo:
    """One caller's last evaluation, rule by rule; an agent's is ``scan.RuleOutputs``.

    On the next evaluation of the same rule set, a rule whose inputs are unchanged is not run
    again. Its last result or error is used. So a changed pass costs in proportion to what
    its change reaches.

    A rule's inputs are:

    - what of each feature its terms can observe;
    - the ``rule.matched`` names it reads, unchanged by the rules before it.

    A rule's result depends on nothing else: no clock, no environment.
    """

    __slots__ = (
        "_inputs",
        "_keys",
        "_next",
        "_out",
        "_prints",
        "_results",
        "_ruleset",
        "_steps",
        "filtered",
        "reused",
    )

    def __init__(self) -> None:
        self._ruleset: RuleSet | None = None
        self._steps: list[_Step] = []
        self._inputs: frozenset[Input] = frozenset()
        # per feature the names any rule's terms read (None: all): one pass over its elements
        self._keys: dict[str, tuple[str, ...] | None] = {}
        self._prints: dict[str, Any] = {}
        self._next: tuple[Features, dict[str, Any]] | None = None  # fingerprint()'s
        self._results: list[RuleResult | RuleEvalError | None] = []
        # the last run's output and rule.matched elements, when no rule failed in it: a run
        # in which no rule's input moved is that output again, without the rules' loop
        self._out: tuple[_Collected, dict[str, str] | None] | None = None
        self.reused = False  # the last run was the output before it again
        # engine.evaluate's filtered output of the last run, keyed on its namespaces
        self.filtered: tuple[Any, Any] | None = None

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
            self._out, self.filtered = None, None

    def _moved(self, inp: Input, prints: dict[str, Any]) -> bool:
        """Whether the elements ``inp`` names changed.

        It compares the feature's fingerprints over the names all its rules read, this
        evaluation's and the last one's.
        """
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

    def copied(self, features: Features, copy: Features) -> None:
        """``copy`` is the evaluation's working copy of ``features``, made after
        :meth:`fingerprint` of ``features``: its prints are those, not taken again.

        - The copy holds the same flags and instances, and its attributes are copied.
        - So the elements the prints read are the same, and the prints equal.
        """
        if self._next is not None and self._next[0] is features:
            self._next = (copy, self._next[1])

    def fingerprint(self, rules: RuleSet, features: Features) -> Any:
        """All that an evaluation of ``rules`` reads of ``features``.

        Equal fingerprints, equal output. They cover:

        - what the rules' terms can observe;
        - the attribute features: ``rule.matched`` given with the features, the ``@`` values of
          the output.

        It is far less than the whole features on a host with thousands of PCI functions.
        """
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
        self.reused = not changed and not dirty and self._out is not None
        if self.reused:  # no rule would run again: every result is the last one
            assert self._out is not None
            last_out, final = self._out
            if final is not None:
                feats["attributes"][RULE_MATCHED] = {"elements": dict(final)}
            return _copied(last_out)
        out = self._loop(feats, changed, dirty, errors)
        return out

    def _loop(
        self,
        feats: Features,
        changed: set[Input],
        dirty: set[str],
        errors: list[tuple[str, str]],
    ) -> _Collected:
        """The rules in order, each run again only when its inputs changed."""
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
                    res = engine.execute_rule(st.rule, view, fail_fast=True)
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
        failed = any(type(r) is not RuleResult for r in results)
        self._out = None if failed else (_copied(out), None if matched is None else dict(matched))
        return out


def _copied(out: _Collected) -> _Collected:
    """A copy of ``out`` whose dicts and list a caller may change."""
    return _Collected(
        dict(out.labels),
        dict(out.label_src),
        dict(out.annotations),
        dict(out.ann_src),
        dict(out.ers),
        dict(out.er_src),
        list(out.taints),
        dict(out.vars),
    )


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
    """One rule's result fed back as ``rule.matched`` and collected; an error reported."""
    if isinstance(res, RuleEvalError):
        engine.log.warning("rule %r (%s) failed: %s", st.rule.name, st.obj.source, res)
        errors.append((st.rule.name, str(res)))
        return
    assert res is not None
    _insert_matched(feats, res.labels)
    _insert_matched(feats, res.vars)
    if res.matched:
        out.add(st.rule.name, res)
