"""The one validator every label a profile emits passes.

- The rules are :mod:`nfd_gpu.names`: name and value shape, prefix, allowed namespaces.
- This module words them for our labels: a key must be prefixed; a value is empty or a
  valid name part.
- Values are made valid where they are written, with :func:`nfd_gpu.names.sanitize_value`.
"""

from __future__ import annotations

from collections.abc import Mapping

from nfd_gpu.names import NAME_MAX, is_dns1123_subdomain, is_name_shape, namespace_allowed


class LabelError(ValueError):
    """A label key or value that Kubernetes or nfd-master would reject."""


def check_name(name: str) -> None:
    if len(name) > NAME_MAX:
        raise LabelError(f"name part {name!r} is longer than {NAME_MAX} characters")
    if not is_name_shape(name):
        raise LabelError(f"name part {name!r} is not a valid label name")


def check_key(key: str) -> None:
    """Raise :class:`LabelError` unless ``key`` is a prefixed, allowed label key."""
    prefix, sep, name = key.rpartition("/")
    if not sep:
        raise LabelError(f"label {key!r}: unprefixed keys are not allowed")
    if "/" in prefix:
        raise LabelError(f"label {key!r}: more than one '/'")
    if not is_dns1123_subdomain(prefix):
        raise LabelError(f"label {key!r}: prefix {prefix!r} is not a DNS-1123 subdomain")
    check_namespace(prefix, key)
    check_name(name)


def check_namespace(ns: str, key: str) -> None:
    if not namespace_allowed(ns):
        raise LabelError(f"label {key!r}: namespace {ns!r} is not allowed")


def check_value(key: str, value: str) -> None:
    if len(value) > NAME_MAX:
        raise LabelError(f"label {key!r}: value longer than {NAME_MAX} characters")
    if value and not is_name_shape(value):
        raise LabelError(f"label {key!r}: invalid value {value!r}")


def check_label(key: str, value: str) -> None:
    check_key(key)
    check_value(key, value)


def filter_labels(labels: Mapping[str, str], warnings: list[str]) -> dict[str, str]:
    """Keep valid labels; each invalid one is dropped with a warning."""
    out = {}
    for k, v in labels.items():
        try:
            check_label(k, v)
        except LabelError as exc:
            warnings.append(f"dropped label: {exc}")
            continue
        out[k] = v
    return out
