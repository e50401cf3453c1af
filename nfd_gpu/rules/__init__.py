"""Custom label rules: NFD ``NodeFeatureRule`` documents evaluated locally with
nfd-master's exact semantics.

Public API::

    from nfd_gpu.rules import load_rules, evaluate, RuleError
    rules = load_rules("/etc/nfd-gpu/rules.d")   # file or directory
    rules = load_rules(path, tolerant=True)      # agent: skip broken, see .problems
    out = evaluate(rules, features)              # RuleOutput
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfd_gpu.rules.engine import RuleOutput, evaluate, execute_rule
    from nfd_gpu.rules.loader import load_rules, ruleset_from_documents
    from nfd_gpu.rules.model import Rule, RuleError, RuleObject, RuleSet

# Imported on first use: `nfd-gpu` builds its CLI (nfd_gpu/cli/rules.py) on every
# start, and the engine (templates, regex translation) is not needed for a scan.
_LAZY = {
    "RuleOutput": "engine",
    "evaluate": "engine",
    "execute_rule": "engine",
    "load_rules": "loader",
    "ruleset_from_documents": "loader",
    "Rule": "model",
    "RuleError": "model",
    "RuleObject": "model",
    "RuleSet": "model",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'nfd_gpu.rules' has no attribute {name!r}")
    return getattr(importlib.import_module(f"nfd_gpu.rules.{mod}"), name)


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
