"""Hand-picked cases against NFD's code, each once a known or likely miss."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.oracle import comparable, nfd_gpu_case, oracle_batch

FEATURES = {
    "spec": {
        "features": {
            "flags": {"dev.flag": {"elements": {"a": {}}}},
            "attributes": {"dev.attr": {"elements": {"a": "1", "b": "v2.1.0"}}},
            "instances": {
                "dev.inst": {"elements": [{"attributes": {"a": "1"}}, {"attributes": {}}]}
            },
        }
    }
}


def _doc(*rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "cases"},
        "spec": {"rules": list(rules)},
    }


RANGE = "{{range .dev.%s}}%s-{{.Name}}={{.Value}}\n{{end}}"

CASES = {
    # Keys matched by DoesNotExist are template data: attributes with an empty
    # Value, flags with their Name only.
    "doesnotexist-attribute": _doc(
        {
            "name": "r",
            "matchFeatures": [
                {"feature": "dev.attr", "matchExpressions": {"zz": {"op": "DoesNotExist"}}}
            ],
            "labelsTemplate": RANGE % ("attr", "d"),
        }
    ),
    "doesnotexist-flag": _doc(
        {
            "name": "r",
            "matchFeatures": [
                {"feature": "dev.flag", "matchExpressions": {"zz": {"op": "DoesNotExist"}}}
            ],
            "labelsTemplate": "{{range .dev.flag}}f-{{.Name}}=x\n{{end}}",
        }
    ),
    "doesnotexist-instance": _doc(
        {
            "name": "r",
            "matchFeatures": [
                {"feature": "dev.inst", "matchExpressions": {"zz": {"op": "DoesNotExist"}}}
            ],
            "labelsTemplate": "n={{len .dev.inst}}\n",
        }
    ),
    "feature-name-case": _doc(
        {
            "name": "r",
            "matchFeatures": [{"feature": "Dev.Attr", "matchExpressions": {"a": {"op": "Exists"}}}],
            "labelsTemplate": "{{range .Dev.Attr}}c-{{.Name}}={{.Value}}\n{{end}}",
        }
    ),
    "matchany-templates-each": _doc(
        {
            "name": "r",
            "matchAny": [
                {
                    "matchFeatures": [
                        {"feature": "dev.attr", "matchName": {"op": "In", "value": ["a"]}}
                    ]
                },
                {
                    "matchFeatures": [
                        {"feature": "dev.attr", "matchName": {"op": "In", "value": ["b"]}}
                    ]
                },
            ],
            "labelsTemplate": RANGE % ("attr", "m"),
        }
    ),
    "chaining-vars": _doc(
        {"name": "r1", "vars": {"v": "1"}, "matchFeatures": [{"feature": "dev.flag"}]},
        {
            "name": "r2",
            "labels": {"chained": "@rule.matched.v"},
            "matchFeatures": [
                {"feature": "rule.matched", "matchExpressions": {"v": {"op": "In", "value": ["1"]}}}
            ],
        },
    ),
    "version-compare": _doc(
        {
            "name": "r",
            "labels": {"new": "true"},
            "matchFeatures": [
                {
                    "feature": "dev.attr",
                    "matchExpressions": {"b": {"op": "Gt", "value": ["2.0.0"], "type": "version"}},
                }
            ],
        }
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_agrees(name: str) -> None:
    case = {"rules": [CASES[name]], "features": FEATURES}
    (nfd,) = oracle_batch([case])
    ours = nfd_gpu_case(case["rules"], case["features"])
    assert comparable(ours) == comparable(nfd)
    assert nfd["result"]["labels"] or nfd["result"]["vars"] or nfd["result"]["errors"]
