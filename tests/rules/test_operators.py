"""Table tests: every operator on flag, attribute and instance features, end to end."""

from __future__ import annotations

from typing import Any

import pytest

from nfd_gpu.features import Features
from tests.rules.conftest import feats, run_rules

ATTRS = feats(
    attributes={
        "gpu.node": {
            "count": "8",
            "vendor": "nvidia",
            "family": "hopper",
            "memory-mib": "81559",
            "mig.capable": "true",
            "sriov.capable": "false",
            "driver.version": "550.54.15",
            "kernel": "5.15.0-91-generic",
            "product": "NVIDIA-H100",
        }
    }
)
FLAGS = feats(flags={"kernel.loadedmodule": ["nvidia", "nvidia_uvm", "i915"]})
INSTANCES = feats(
    instances={
        "gpu.device": [
            {
                "vendor": "nvidia",
                "memory_mib": "81559",
                "compute_major": "9",
                "mig_capable": "true",
            },
            {
                "vendor": "nvidia",
                "memory_mib": "24576",
                "compute_major": "8",
                "mig_capable": "false",
            },
        ]
    }
)


def _match(
    features: Features, feature: str, key: str, op: str, value: list[str], vtype: str = ""
) -> Any:
    expr: dict[str, Any] = {"op": op, "value": value}
    if vtype:
        expr["type"] = vtype
    rule = {
        "name": "t",
        "labels": {"hit": "true"},
        "matchFeatures": [{"feature": feature, "matchExpressions": {key: expr}}],
    }
    out = run_rules([rule], features, strict=False)
    if out.errors:
        return "error"
    return out.labels.get("feature.node.kubernetes.io/hit") == "true"


ATTRIBUTE_CASES = [
    ("vendor", "In", ["amd", "nvidia"], "", True),
    ("vendor", "In", ["NVIDIA"], "", False),  # case-sensitive
    ("missing", "In", ["x"], "", False),
    ("vendor", "NotIn", ["amd", "intel"], "", True),
    ("vendor", "NotIn", ["nvidia"], "", False),
    ("missing", "NotIn", ["x"], "", False),  # element must exist
    ("family", "InRegexp", ["^hop"], "", True),
    ("family", "InRegexp", ["opp"], "", True),  # unanchored search
    ("family", "InRegexp", ["^opp"], "", False),
    ("family", "InRegexp", ["^hopper$"], "", True),
    ("count", "Exists", [], "", True),
    ("missing", "Exists", [], "", False),
    ("missing", "DoesNotExist", [], "", True),
    ("count", "DoesNotExist", [], "", False),
    ("memory-mib", "Gt", ["81558"], "", True),
    ("memory-mib", "Gt", ["81559"], "", False),
    ("memory-mib", "Ge", ["81559"], "", True),
    ("memory-mib", "Lt", ["81560"], "", True),
    ("memory-mib", "Le", ["81558"], "", False),
    ("memory-mib", "GtLt", ["40000", "81559"], "", False),
    ("memory-mib", "GeLe", ["40000", "81559"], "", True),
    ("memory-mib", "GeLe", ["81559", "81559"], "", "error"),  # NFD: value[0] must be < value[1]
    ("vendor", "Gt", ["1"], "", "error"),  # non-integer input
    ("missing", "Gt", ["x"], "", False),  # missing element: false before any check
    ("mig.capable", "IsTrue", [], "", True),
    ("sriov.capable", "IsTrue", [], "", False),
    ("sriov.capable", "IsFalse", [], "", True),
    ("vendor", "IsFalse", [], "", False),
    ("driver.version", "Ge", ["550"], "version", True),
    ("driver.version", "Gt", ["550.54.15"], "version", False),
    ("driver.version", "GtLt", ["535", "560.1"], "version", True),
    ("kernel", "Ge", ["5.15"], "version", True),  # prerelease dropped: 5.15.0
    ("kernel", "Gt", ["5.15.0"], "version", False),
    ("driver.version", "Gt", ["-11"], "version", "error"),
    ("driver.version", "Gt", ["1"], "semver", "error"),
]


@pytest.mark.parametrize(("key", "op", "value", "vtype", "want"), ATTRIBUTE_CASES)
def test_attribute_operators(key: str, op: str, value: list[str], vtype: str, want: Any) -> None:
    assert _match(ATTRS, "gpu.node", key, op, value, vtype) == want


FLAG_CASES = [
    ("nvidia", "Exists", [], True),
    ("amdgpu", "Exists", [], False),
    ("amdgpu", "DoesNotExist", [], True),
    ("nvidia", "DoesNotExist", [], False),
    # value operators are never true on flags (no value), and never an error
    ("nvidia", "In", ["nvidia"], False),
    ("nvidia", "NotIn", ["x"], False),
    ("nvidia", "InRegexp", ["."], False),
    ("nvidia", "Gt", ["a"], False),
    ("nvidia", "IsTrue", [], False),
    ("nvidia", "GeLe", ["5", "1"], False),
    ("nvidia", "Exists", ["x"], "error"),
]


@pytest.mark.parametrize(("key", "op", "value", "want"), FLAG_CASES)
def test_flag_operators(key: str, op: str, value: list[str], want: Any) -> None:
    assert _match(FLAGS, "kernel.loadedmodule", key, op, value) == want


INSTANCE_CASES = [
    ("vendor", "In", ["nvidia"], True),
    ("compute_major", "Ge", ["9"], True),
    ("compute_major", "Gt", ["9"], False),
    ("memory_mib", "Lt", ["30000"], True),
    ("mig_capable", "IsTrue", [], True),
    ("missing", "DoesNotExist", [], True),
    ("missing", "Exists", [], False),
    ("vendor", "InRegexp", ["^amd"], False),
    ("vendor", "Gt", ["1"], "error"),
]


@pytest.mark.parametrize(("key", "op", "value", "want"), INSTANCE_CASES)
def test_instance_operators(key: str, op: str, value: list[str], want: Any) -> None:
    assert _match(INSTANCES, "gpu.device", key, op, value) == want


def test_instance_expressions_apply_to_the_same_instance() -> None:
    # 80 GB GPU has compute 9; the compute-8 GPU has 24 GB: no single instance has both.
    term = {
        "feature": "gpu.device",
        "matchExpressions": {
            "memory_mib": {"op": "Gt", "value": ["40000"]},
            "compute_major": {"op": "In", "value": ["8"]},
        },
    }
    out = run_rules([{"name": "t", "labels": {"hit": "x"}, "matchFeatures": [term]}], INSTANCES)
    assert out.labels == {}
    term["matchExpressions"]["compute_major"] = {"op": "In", "value": ["9"]}  # type: ignore[index]
    out = run_rules([{"name": "t", "labels": {"hit": "x"}, "matchFeatures": [term]}], INSTANCES)
    assert out.labels == {"feature.node.kubernetes.io/hit": "x"}


def test_missing_feature_is_false_not_error() -> None:
    out = run_rules(
        [
            {
                "name": "t",
                "labels": {"hit": "x"},
                "matchFeatures": [
                    {"feature": "no.such", "matchExpressions": {"a": {"op": "Gt", "value": ["x"]}}}
                ],
            }
        ],
        ATTRS,
    )
    assert out.labels == {} and out.errors == []


def test_match_name_on_flags_and_instances() -> None:
    rule = {
        "name": "t",
        "labelsTemplate": "{{ range .kernel.loadedmodule }}mod.{{ .Name }}=true\n{{ end }}",
        "matchFeatures": [
            {
                "feature": "kernel.loadedmodule",
                "matchName": {"op": "InRegexp", "value": ["^nvidia"]},
            }
        ],
    }
    out = run_rules([rule], FLAGS)
    assert out.labels == {
        "feature.node.kubernetes.io/mod.nvidia": "true",
        "feature.node.kubernetes.io/mod.nvidia_uvm": "true",
    }
    rule2 = {
        "name": "t2",
        "labels": {"hit": "x"},
        "matchFeatures": [
            {"feature": "gpu.device", "matchName": {"op": "In", "value": ["compute_major"]}}
        ],
    }
    assert run_rules([rule2], INSTANCES).labels == {"feature.node.kubernetes.io/hit": "x"}


def test_multi_type_feature_union_and_does_not_exist_in_both() -> None:
    both = feats(flags={"cpu.cpuid": ["AVX"]}, attributes={"cpu.cpuid": {"VENDOR": "intel"}})

    def hit(exprs: dict[str, Any]) -> bool:
        rule = {
            "name": "t",
            "labels": {"hit": "x"},
            "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": exprs}],
        }
        return bool(run_rules([rule], both).labels)

    assert hit({"AVX": {"op": "Exists"}, "VENDOR": {"op": "In", "value": ["intel"]}})
    assert not hit({"VENDOR": {"op": "DoesNotExist"}})
    assert not hit({"AVX": {"op": "DoesNotExist"}})
    assert hit({"SSE": {"op": "DoesNotExist"}})
