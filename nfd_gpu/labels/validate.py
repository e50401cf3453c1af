"""The one validator and sanitiser every label a profile emits passes.

The rules (name and value shape, prefix, allowed namespaces) are
:mod:`nfd_gpu.names`; this module words them for our labels: a key must be
prefixed, a value is empty or a valid name part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nfd_gpu.names import NAME_MAX as NAME_MAX  # re-exported: label code reads it here
from nfd_gpu.names import is_dns1123_subdomain, is_name_shape, namespace_allowed

# A run of characters outside [A-Za-z0-9._-] (absorbing dashes next to it) -> one "-".
_BAD_RUN_RE = re.compile(r"-*[^A-Za-z0-9._-]+(?:-*[^A-Za-z0-9._-]+)*-*")
_EDGE_RE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


class LabelError(ValueError):
    """A label key or value that Kubernetes / nfd-master would reject."""


def sanitize_value(value: str, limit: int = NAME_MAX) -> str:
    """Make any string a valid label value (or name part).

    Keeps ``[A-Za-z0-9._-]``, turns each run of anything else into one ``-``,
    trims to ``limit`` characters and to alphanumeric ends. May return ``""``.
    """
    s = _BAD_RUN_RE.sub("-", value)
    s = _EDGE_RE.sub("", s)
    if len(s) > limit:
        s = _EDGE_RE.sub("", s[:limit])
    return s


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
