"""Shared helpers for the rule engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nfd_gpu.features import Features
from nfd_gpu.rules import RuleOutput, evaluate, ruleset_from_documents

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sysfs"
# Vendors' own NodeFeatureRules, verbatim (tests/data/README.md).
INTEL_RULES = REPO / "tests" / "data" / "intel"
AMD_RULE = REPO / "tests" / "data" / "amd" / "gpu-nfd-default-rule.yaml"


def run_rules(rules: list[dict[str, Any]], features: Features, strict: bool = False) -> RuleOutput:
    """Evaluate rule dicts exactly like `nfd-gpu rules test` does (loader + evaluate)."""
    doc = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "test"},
        "spec": {"rules": rules},
    }
    return evaluate(ruleset_from_documents([doc], strict=strict), features)


def feats(
    flags: dict[str, list[str]] | None = None,
    attributes: dict[str, dict[str, str]] | None = None,
    instances: dict[str, list[dict[str, str]]] | None = None,
) -> Features:
    return {
        "flags": {k: {"elements": {e: {} for e in v}} for k, v in (flags or {}).items()},
        "attributes": {k: {"elements": dict(v)} for k, v in (attributes or {}).items()},
        "instances": {
            k: {"elements": [{"attributes": dict(i)} for i in v]}
            for k, v in (instances or {}).items()
        },
    }
