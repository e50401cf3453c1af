"""Custom label rules: NFD ``NodeFeatureRule`` documents evaluated locally with
nfd-master's exact semantics.

Public API::

    from nfd_gpu.rules import load_rules, evaluate, RuleError
    rules = load_rules("/etc/nfd-gpu/rules.d")   # file or directory
    rules = load_rules(path, tolerant=True)      # agent: skip broken, see .problems
    out = evaluate(rules, features)              # RuleOutput
"""

from __future__ import annotations

from nfd_gpu.rules.engine import RuleOutput, evaluate, execute_rule
from nfd_gpu.rules.loader import load_rules, ruleset_from_documents
from nfd_gpu.rules.model import Rule, RuleError, RuleObject, RuleSet

__all__ = [
    "Rule",
    "RuleError",
    "RuleObject",
    "RuleOutput",
    "RuleSet",
    "evaluate",
    "execute_rule",
    "load_rules",
    "ruleset_from_documents",
]
