"""Parsed NodeFeatureRule objects (immutable)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nfd_gpu.rules.expressions import MatchExpression
from nfd_gpu.rules.template import Template, TemplateError


class RuleError(ValueError):
    """Invalid rule input. ``problems`` holds one ``file: rule: message`` line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class Term:
    """One ``matchFeatures`` term."""

    feature: str
    match_expressions: tuple[tuple[str, MatchExpression], ...] | None = None
    match_name: MatchExpression | None = None

    @property
    def feature_key(self) -> str:
        return self.feature.lower()

    @property
    def template_path(self) -> tuple[str, str]:
        """(domain, feature) under which matched elements appear in templates."""
        dom, dot, nam = self.feature.partition(".")
        return (dom, nam) if dot else (self.feature.lower(), "")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def as_dict(self) -> dict[str, str]:
        d = {"key": self.key, "effect": self.effect}
        if self.value:
            d["value"] = self.value
        return d


CompiledTemplate = Template | TemplateError | None


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of ``spec.rules``. A template that failed to parse is kept as the
    error (only in non-strict loading) and raised when the rule matches, as NFD does."""

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


@dataclass(frozen=True, slots=True)
class RuleObject:
    """One NodeFeatureRule object (``metadata.name``) from ``source``."""

    name: str
    source: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class RuleSet:
    """All loaded rule objects; ``evaluate`` runs them sorted by name."""

    objects: tuple[RuleObject, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def rule_count(self) -> int:
        return sum(len(o.rules) for o in self.objects)
