"""Rule-level semantics: ordering, rule.matched, templates, outputs, errors."""

from __future__ import annotations

from typing import Any

from nfd_gpu.rules import evaluate, ruleset_from_documents
from tests.rules.conftest import feats, run_rules

NODE = feats(
    flags={"kernel.loadedmodule": ["nvidia"]},
    attributes={"gpu.node": {"count": "2", "vendor": "nvidia", "memory-mib": "81559"}},
    instances={
        "pci.device": [
            {"class": "0302", "vendor": "10de", "device": "2330"},
            {"class": "0302", "vendor": "10de", "device": "2330"},
        ]
    },
)


def _obj(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": name},
        "spec": {"rules": rules},
    }


def test_rule_without_matchers_always_matches() -> None:
    assert run_rules([{"name": "a", "labels": {"x": "1"}}], NODE).labels == {
        "feature.node.kubernetes.io/x": "1"
    }


def test_objects_sorted_by_name_rules_in_order_later_wins() -> None:
    b = _obj("b-obj", [{"name": "b1", "labels": {"tier": "b"}}])
    a = _obj(
        "a-obj",
        [{"name": "a1", "labels": {"tier": "a1"}}, {"name": "a2", "labels": {"tier": "a2"}}],
    )
    out = evaluate(ruleset_from_documents([b, a]), NODE)
    assert out.labels == {"feature.node.kubernetes.io/tier": "b"}
    out = evaluate(
        ruleset_from_documents([_obj("z", [{"name": "z", "labels": {"tier": "z"}}]), a]), NODE
    )
    assert out.labels == {"feature.node.kubernetes.io/tier": "z"}


def test_rule_matched_backreference_sees_labels_and_vars_raw() -> None:
    rules = [
        {
            "name": "first",
            "labels": {"gpu-ok": "true"},
            "vars": {"big": "yes"},
            "matchFeatures": [
                {
                    "feature": "gpu.node",
                    "matchExpressions": {"memory-mib": {"op": "Gt", "value": ["40000"]}},
                }
            ],
        },
        {
            "name": "second",
            "labels": {"both": "true"},
            "matchFeatures": [
                {
                    "feature": "rule.matched",
                    "matchExpressions": {
                        "gpu-ok": {"op": "IsTrue"},
                        "big": {"op": "In", "value": ["yes"]},
                    },
                }
            ],
        },
        {
            "name": "third",
            "labels": {"never": "true"},
            "matchFeatures": [
                {
                    "feature": "rule.matched",
                    "matchExpressions": {"feature.node.kubernetes.io/gpu-ok": {"op": "Exists"}},
                }
            ],
        },
    ]
    out = run_rules(rules, NODE)
    assert out.labels == {
        "feature.node.kubernetes.io/gpu-ok": "true",
        "feature.node.kubernetes.io/both": "true",
    }
    assert out.vars == {"big": "yes"}
    assert "rule.matched" not in NODE["attributes"]  # caller's features untouched


def test_rule_matched_before_any_rule_is_absent() -> None:
    rules = [
        {
            "name": "r",
            "labels": {"x": "1"},
            "matchFeatures": [
                {"feature": "rule.matched", "matchExpressions": {"a": {"op": "DoesNotExist"}}}
            ],
        }
    ]
    assert run_rules(rules, NODE).labels == {}
    rules.insert(
        0, {"name": "nomatch", "labels": {"y": "1"}, "matchFeatures": [{"feature": "no.such"}]}
    )
    assert run_rules(rules, NODE).labels == {"feature.node.kubernetes.io/x": "1"}


def test_error_drops_only_that_rule() -> None:
    rules = [
        {"name": "ok1", "labels": {"a": "1"}},
        {
            "name": "bad",
            "labels": {"b": "1"},
            "matchFeatures": [
                {
                    "feature": "gpu.node",
                    "matchExpressions": {"vendor": {"op": "Gt", "value": ["1"]}},
                }
            ],
        },
        {"name": "ok2", "labels": {"c": "1"}},
    ]
    out = run_rules(rules, NODE)
    assert set(out.labels) == {"feature.node.kubernetes.io/a", "feature.node.kubernetes.io/c"}
    assert [r for r, _ in out.errors] == ["bad"]
    assert "not a number" in out.errors[0][1]


def test_templates_labels_override_and_instances() -> None:
    rule = {
        "name": "t",
        "labelsTemplate": "{{ range .pci.device }}pci-{{ .class }}_{{ .vendor }}.present=true\n{{ end }}gpu.count={{ len .pci.device }}\nstatic=from-template",  # noqa: E501
        "labels": {"static": "from-labels"},
        "matchFeatures": [
            {
                "feature": "pci.device",
                "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}},
            }
        ],
    }
    out = run_rules([rule], NODE)
    assert out.labels == {
        "feature.node.kubernetes.io/pci-0302_10de.present": "true",
        "feature.node.kubernetes.io/gpu.count": "2",
        "feature.node.kubernetes.io/static": "from-labels",
    }


def test_template_line_without_equals_is_rule_error() -> None:
    rule = {"name": "t", "labelsTemplate": "justakey", "matchFeatures": [{"feature": "gpu.node"}]}
    out = run_rules([rule], NODE)
    assert out.labels == {} and out.errors and "format must be '<key>=<value>'" in out.errors[0][1]


def test_templates_run_only_with_a_matcher() -> None:
    # NFD executes templates only on matched elements: a rule without matchFeatures /
    # matchAny matches, but its templates produce nothing.
    out = run_rules([{"name": "t", "labelsTemplate": "a=1", "labels": {"b": "2"}}], NODE)
    assert out.labels == {"feature.node.kubernetes.io/b": "2"}


def test_match_any_templates_run_per_matching_element() -> None:
    rule = {
        "name": "any",
        "varsTemplate": "{{ range .gpu.node }}seen.{{ .Name }}={{ .Value }}\n{{ end }}",
        "matchAny": [
            {
                "matchFeatures": [
                    {
                        "feature": "gpu.node",
                        "matchExpressions": {"vendor": {"op": "In", "value": ["nvidia"]}},
                    }
                ]
            },
            {
                "matchFeatures": [
                    {
                        "feature": "gpu.node",
                        "matchExpressions": {"vendor": {"op": "In", "value": ["amd"]}},
                    }
                ]
            },
            {
                "matchFeatures": [
                    {
                        "feature": "gpu.node",
                        "matchExpressions": {"count": {"op": "Gt", "value": ["1"]}},
                    }
                ]
            },
        ],
    }
    assert run_rules([rule], NODE).vars == {"seen.vendor": "nvidia", "seen.count": "2"}


def test_match_any_and_match_features_are_anded() -> None:
    rule = {
        "name": "and",
        "labels": {"x": "1"},
        "matchAny": [
            {
                "matchFeatures": [
                    {
                        "feature": "kernel.loadedmodule",
                        "matchExpressions": {"nvidia": {"op": "Exists"}},
                    }
                ]
            }
        ],
        "matchFeatures": [
            {"feature": "gpu.node", "matchExpressions": {"vendor": {"op": "In", "value": ["amd"]}}}
        ],
    }
    assert run_rules([rule], NODE).labels == {}


def test_dynamic_values_prefixing_and_namespace_filter() -> None:
    rules = [
        {
            "name": "dyn",
            "labels": {
                "mem": "@gpu.node.memory-mib",
                "bad": "@gpu.node.nope",
                "vendor.example.com/x": "1",
                "dup": "unprefixed",
                "feature.node.kubernetes.io/dup": "explicit",
            },
            "extendedResources": {"gpu-memory": "@gpu.node.memory-mib"},
            "annotations": {"note": "hello"},
            "taints": [
                {"key": "feature.node.kubernetes.io/gpu", "value": "true", "effect": "NoSchedule"}
            ],
        },
        {
            "name": "tmpl-bad-ns",
            "labelsTemplate": "kubernetes.io/evil=1\nsub.feature.node.kubernetes.io/ok=1",
            "matchFeatures": [{"feature": "gpu.node"}],
        },
    ]
    out = run_rules(rules, NODE)
    assert out.labels == {
        "feature.node.kubernetes.io/mem": "81559",
        "vendor.example.com/x": "1",
        "feature.node.kubernetes.io/dup": "explicit",
        "sub.feature.node.kubernetes.io/ok": "1",
    }
    assert out.extended_resources == {"feature.node.kubernetes.io/gpu-memory": "81559"}
    assert out.annotations == {"feature.node.kubernetes.io/note": "hello"}
    assert out.taints == [
        {"key": "feature.node.kubernetes.io/gpu", "value": "true", "effect": "NoSchedule"}
    ]
    msgs = dict(out.errors)
    assert "element nope not found on feature gpu.node" in msgs["dyn"]
    assert "namespace 'kubernetes.io' is not allowed" in msgs["tmpl-bad-ns"]


def test_case_insensitive_feature_name_and_original_case_template_path() -> None:
    rule = {
        "name": "t",
        "labelsTemplate": "n={{ len .PCI.device }}",
        "matchFeatures": [
            {
                "feature": "PCI.device",
                "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}},
            }
        ],
    }
    assert run_rules([rule], NODE).labels == {"feature.node.kubernetes.io/n": "2"}


# ----------------------------------------------- equal-term reuse (optimisation)


def test_equal_terms_on_rule_matched_are_never_reused() -> None:
    term = {"feature": "rule.matched", "matchExpressions": {"x": {"op": "IsTrue"}}}
    out = run_rules(
        [
            {"name": "a", "labels": {"example.com/a": "true"}, "matchFeatures": [term]},
            {"name": "set-x", "vars": {"x": "true"}},
            {"name": "c", "labels": {"example.com/c": "true"}, "matchFeatures": [term]},
        ],
        feats(),
    )
    assert out.labels == {"example.com/c": "true"}


def test_equal_failing_terms_report_an_error_each_time() -> None:
    term = {"feature": "gpu.device", "matchExpressions": {"memory": {"op": "Gt", "value": ["1"]}}}
    f = feats(instances={"gpu.device": [{"memory": "lots"}]})
    rules = [
        {"name": n, "labels": {f"example.com/{n}": "true"}, "matchFeatures": [term]}
        for n in ("a", "b")
    ]
    out = run_rules(rules, f)
    assert [r for r, _ in out.errors] == ["a", "b"]
    assert out.labels == {}
    assert run_rules(rules, f).errors == out.errors  # memoised values never hide errors


def test_reused_term_elements_are_not_shared_between_rules() -> None:
    nv = {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}}}
    gpu = {"feature": "pci.device", "matchExpressions": {"class": {"op": "In", "value": ["0302"]}}}
    tmpl = "example.com/{}={{{{ len .pci.device }}}}"
    f = feats(
        instances={
            "pci.device": [
                {"vendor": "10de", "class": "0302"},
                {"vendor": "10de", "class": "0680"},
                {"vendor": "1a03", "class": "0300"},
            ]
        }
    )
    out = run_rules(
        [
            {"name": "one", "labelsTemplate": tmpl.format("one"), "matchFeatures": [nv]},
            # two terms on the same feature: their elements are concatenated
            {"name": "two", "labelsTemplate": tmpl.format("two"), "matchFeatures": [nv, gpu]},
            {"name": "three", "labelsTemplate": tmpl.format("three"), "matchFeatures": [nv]},
        ],
        f,
    )
    assert out.labels == {"example.com/one": "2", "example.com/two": "3", "example.com/three": "2"}
