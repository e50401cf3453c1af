"""Parsed NodeFeatureRule objects, immutable."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from nfd_gpu.record import Record, record
from nfd_gpu.rules.expressions import CompiledExpressions, MatchExpression, compile_expressions
from nfd_gpu.rules.template import Template, TemplateError


class RuleError(ValueError):
    """Invalid rule input. ``problems`` holds one ``file: rule: message`` line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class Term:
    """One ``matchFeatures`` term. Its expressions are compiled once, here, so
    evaluation never re-parses bounds or regexps."""

    feature: str
    match_expressions: tuple[tuple[str, MatchExpression], ...] | None = None
    match_name: MatchExpression | None = None
    feature_key: str = field(init=False, repr=False, compare=False)
    template_path: tuple[str, str] = field(init=False, repr=False, compare=False)
    compiled: CompiledExpressions | None = field(init=False, repr=False, compare=False)
    # equal terms (same feature key, expressions and matchName) share one id, so
    # an evaluation can reuse a term's result across rules (engine.FeatureView)
    term_id: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        dom, dot, nam = self.feature.partition(".")
        # (domain, feature) under which matched elements appear in templates
        path = (dom, nam) if dot else (self.feature.lower(), "")
        key = (self.feature.lower(), self.match_expressions, self.match_name)
        interned = _TERMS.get(key)
        if interned is None:
            if len(_TERMS) >= _TERMS_MAX:
                _TERMS.clear()  # ids come from a counter, so they are never reused
            compiled = (
                None
                if self.match_expressions is None
                else compile_expressions(self.match_expressions)
            )
            interned = _TERMS[key] = (next(_TERM_IDS), compiled)
        object.__setattr__(self, "feature_key", key[0])
        object.__setattr__(self, "template_path", path)
        object.__setattr__(self, "term_id", interned[0])
        object.__setattr__(self, "compiled", interned[1])


_TERM_IDS = itertools.count()
_TERMS_MAX = 65536
_TERMS: dict[
    tuple[str, tuple[tuple[str, MatchExpression], ...] | None, MatchExpression | None],
    tuple[int, CompiledExpressions | None],
] = {}


@record()
class Taint(Record):
    key: str
    value: str
    effect: str

    def as_dict(self) -> dict[str, str]:
        d = {"key": self.key, "effect": self.effect}
        if self.value:
            d["value"] = self.value
        return d


CompiledTemplate = Template | TemplateError | None


@record()
class Rule(Record):
    """One rule of ``spec.rules``.

    A template that failed to parse is kept as the error, only in non-strict loading. It is
    raised when the rule matches, as NFD does.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    labels_template: CompiledTemplate = None
    vars: Mapping[str, str] = field(default_factory=dict)
    vars_template: CompiledTemplate = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    match_features: tuple[Term, ...] = ()
    match_any: tuple[tuple[Term, ...], ...] = ()


@record()
class RuleObject(Record):
    """One NodeFeatureRule object, named by ``metadata.name``, from ``source``."""

    name: str
    source: str
    rules: tuple[Rule, ...]


ALL_NAMES: frozenset[str] = frozenset({"*"})  # a feature whose every element a rule sees


def _seen_elements(objects: tuple[RuleObject, ...]) -> dict[str, frozenset[str]]:
    """Feature key to the element names some rule can observe, or :data:`ALL_NAMES`.

    - A ``matchName`` looks at every name.
    - A rule with a template sees the whole of each matched element of every feature it
      names; an instance's element is its attribute map.
    - Otherwise an expression observes only the element it names: ``a.get(name)``.
    - The result of a term does not depend on any other element's presence or value.
    """
    seen: dict[str, set[str] | None] = {}
    for obj in objects:
        for rule in obj.rules:
            templated = rule.labels_template is not None or rule.vars_template is not None
            for terms in (rule.match_features, *rule.match_any):
                for t in terms:
                    key = t.feature_key
                    if key in seen and seen[key] is None:
                        continue
                    if templated or t.match_name is not None:
                        seen[key] = None
                        continue
                    names = seen.setdefault(key, set())
                    assert names is not None
                    names.update(n for n, _ in t.match_expressions or ())
    return {k: ALL_NAMES if v is None else frozenset(v) for k, v in seen.items()}


@dataclass(frozen=True, slots=True)  # not a record: _seen is left out of eq, hash and repr
class RuleSet:
    """All loaded rule objects; ``evaluate`` runs them sorted by name."""

    objects: tuple[RuleObject, ...] = ()
    warnings: tuple[str, ...] = ()
    # ``load_rules(..., tolerant=True)`` only: one ``file: rule: message`` line per
    # rule, object or file that was skipped (the rest of the set is usable)
    problems: tuple[str, ...] = ()
    # indexed once (the set is immutable): what of each feature the rules can observe
    _seen: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_seen", _seen_elements(self.objects))

    @property
    def rule_count(self) -> int:
        return sum(len(o.rules) for o in self.objects)

    def sees(self, feature: str, names: Collection[str]) -> bool:
        """Whether any rule's result can depend on one of the elements ``names`` of ``feature``.

        Discovery reads the elements only rules look at only then.
        """
        seen = self._seen.get(feature)
        if seen is None:
            return False
        return seen is ALL_NAMES or any(n in seen for n in names)
