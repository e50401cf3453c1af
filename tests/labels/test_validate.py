"""The one label validator and sanitiser."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nfd_gpu.labels.validate import (
    LabelError,
    check_key,
    check_label,
    check_value,
    filter_labels,
)
from nfd_gpu.names import sanitize_value

VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.mark.parametrize(
    ("raw", "out"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
        ("AMD Instinct MI250X / MI250", "AMD-Instinct-MI250X-MI250"),
        ("  Tesla T4\n", "Tesla-T4"),
        ("a=b", "a-b"),
        ("(((", ""),
        ("x" * 80, "x" * 63),
        ("abc-" + "y" * 59 + "-z", "abc-" + "y" * 59),
    ],
)
def test_sanitize(raw: str, out: str) -> None:
    assert sanitize_value(raw) == out


@given(st.text())
def test_sanitized_values_are_always_valid(s: str) -> None:
    v = sanitize_value(s)
    assert VALUE_RE.match(v) and len(v) <= 63
    for bad in "()/= \t\n":
        assert bad not in v


@pytest.mark.parametrize(
    "key",
    [
        "gpu.feature.node.kubernetes.io/count",
        "feature.node.kubernetes.io/x",
        "nvidia.com/gpu.product",
        "profile.node.kubernetes.io/a",
    ],
)
def test_valid_keys(key: str) -> None:
    check_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "count",  # unprefixed
        "kubernetes.io/x",  # denied namespace
        "node.kubernetes.io/x",
        "UPPER.com/x",
        "a/b/c",
        "nvidia.com/" + "x" * 64,
        "nvidia.com/-x",
        "nvidia.com/",
    ],
)
def test_invalid_keys(key: str) -> None:
    with pytest.raises(LabelError):
        check_key(key)


def test_values() -> None:
    check_value("k", "")
    check_value("k", "a.b-c_d")
    for bad in ("-a", "a b", "x" * 64, "a/b", "(x)"):
        with pytest.raises(LabelError):
            check_value("k", bad)


def test_filter_drops_with_warning() -> None:
    warnings: list[str] = []
    out = filter_labels({"nvidia.com/ok": "1", "nvidia.com/bad": "a b", "k": "v"}, warnings)
    assert out == {"nvidia.com/ok": "1"}
    assert len(warnings) == 2


@given(st.text(max_size=70), st.text(max_size=70))
def test_check_label_never_raises_other_errors(k: str, v: str) -> None:
    with contextlib.suppress(LabelError):
        check_label(k, v)


_KEY_PART = st.text(alphabet="aZ09.-_/\n", max_size=8)
_KEY = st.lists(
    st.one_of(_KEY_PART, st.sampled_from(["kubernetes.io", "feature.node.", "x" * 60, "/", ""])),
    max_size=5,
).map("".join)


@given(_KEY, st.one_of(_KEY_PART, st.sampled_from(["", "x" * 63, "x" * 64, "a\n"])))
def test_labels_and_rule_output_follow_one_name_rule(k: str, v: str) -> None:
    """labels/validate.py and rules/validate.py word errors differently but read the same
    rules (nfd_gpu/names.py): they accept exactly the same labels."""
    from nfd_gpu.rules.validate import ValidationError
    from nfd_gpu.rules.validate import check_label as check_rule_label

    def accepts(check: Callable[[str, str], None], error: type[Exception]) -> bool:
        try:
            check(k, v)
        except error:
            return False
        return True

    assert accepts(check_label, LabelError) == accepts(check_rule_label, ValidationError)
