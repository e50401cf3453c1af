"""Kubernetes name and value checks and nfd-master's namespace policy for rule output.

- The rules themselves are :mod:`nfd_gpu.names`, shared with the label validator.
- This module words them as nfd-master does.
- It mirrors ``nfd:pkg/apis/nfd/validate`` and ``nfd-master filterFeatureLabel``, as
  docs/rules.md "Differences from NFD" says.
- It takes nfd-master's default flags: no ``-deny-label-ns``, no ``-extra-label-ns``,
  auto-prefix on.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from nfd_gpu.names import (
    FEATURE_NS,
    NAME_MAX,
    NFD_NAMESPACES,
    is_dns1123_subdomain,
    is_name_shape,
    namespace_allowed,
)

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_QUANTITY_RE = re.compile(
    r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)


class ValidationError(ValueError):
    """A label, annotation, taint or extended resource nfd-master would reject."""


def check_qualified_name(name: str) -> None:
    """k8s ``IsQualifiedName``: ``[prefix/]name``."""
    prefix, slash, base = name.rpartition("/")
    if name.count("/") > 1:
        raise ValidationError(f"invalid name {name!r}: at most one '/' allowed")
    if slash:
        if not prefix:
            raise ValidationError(f"invalid name {name!r}: prefix part must be non-empty")
        if not is_dns1123_subdomain(prefix):
            raise ValidationError(
                f"invalid name {name!r}: prefix must be a lower-case DNS-1123 subdomain"
            )
    if not base:
        raise ValidationError(f"invalid name {name!r}: name part must be non-empty")
    if len(base) > NAME_MAX:
        raise ValidationError(
            f"invalid name {name!r}: name part must be no more than 63 characters"
        )
    if not is_name_shape(base):
        raise ValidationError(
            f"invalid name {name!r}: name part must consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )


def check_label_value(value: str) -> None:
    """k8s ``IsValidLabelValue``."""
    if len(value) > NAME_MAX:
        raise ValidationError(f"invalid value {value!r}: must be no more than 63 characters")
    if value and not is_name_shape(value):
        raise ValidationError(
            f"invalid value {value!r}: must be empty or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )


def namespace(name: str) -> str:
    return name.rpartition("/")[0]


# nfd-gpu's own labels that no rule may write (its health and its counts: a rule writing
# ``health=ok`` over a failed GPU would hide it from the taint rule). The keys are the
# neutral profile's health and count keys (tests/rules/test_own_labels.py checks they match
# docs/labels.md); ``<vendor>`` is one name (a rule's ``intel.datacenter.count`` is its own).
OWN_NS = f"gpu.{FEATURE_NS}"
OWN_KEYS = ("count", "<vendor>.count", "product.<product>.count", "mig.<profile>.count",
            "health", "health.<state>")  # fmt: skip


def _own_re(keys: tuple[str, ...]) -> re.Pattern[str]:
    """The keys as one pattern: ``<vendor>`` is one name, any other ``<...>`` one or more."""

    def one(key: str) -> str:
        parts = re.split(r"(<[^>]+>)", key)
        return "".join(
            "[a-z0-9-]+" if p == "<vendor>" else ".+" if p.startswith("<") else re.escape(p)
            for p in parts
        )

    return re.compile("^(?:" + "|".join(one(k) for k in keys) + ")$")


_OWN_RE = _own_re(OWN_KEYS)


def check_not_own(name: str, own_ns: str = OWN_NS) -> None:
    """A rule may not write nfd-gpu's own health or count labels, :data:`OWN_KEYS`."""
    prefix, _, base = name.rpartition("/")
    if prefix == own_ns and _OWN_RE.match(base):
        raise ValidationError(
            f"label {name!r} is nfd-gpu's own (its health and counts): a rule cannot replace it"
        )


def check_namespace(
    name: str, allowed: Collection[str] = NFD_NAMESPACES, extra: Collection[str] = ()
) -> None:
    """``kubernetes.io`` and ``*.kubernetes.io`` are denied, with exceptions.

    They are allowed in an NFD namespace or a sub-namespace of one, or when listed in
    ``extra``.
    """
    ns = namespace(name)
    if not ns:
        raise ValidationError(f"unprefixed key {name!r} is not allowed")
    if ns in extra:
        return
    if not namespace_allowed(ns, allowed):
        raise ValidationError(f"namespace {ns!r} is not allowed")


def check_label(name: str, value: str, extra_ns: Collection[str] = ()) -> None:
    check_qualified_name(name)
    check_namespace(name, extra=extra_ns)
    check_label_value(value)


def check_annotation(name: str, value: str) -> None:
    check_qualified_name(name)
    check_namespace(name, allowed=(FEATURE_NS,))
    if len(value) > 1024:
        raise ValidationError(f"annotation {name!r}: value longer than 1024 characters")


def check_extended_resource(name: str, value: str) -> None:
    check_qualified_name(name)
    check_namespace(name, allowed=(FEATURE_NS,))
    if not _QUANTITY_RE.fullmatch(value):
        raise ValidationError(f"extended resource {name!r}: value {value!r} is not a quantity")


def check_taint(key: str, value: str, effect: str) -> None:
    check_qualified_name(key)
    check_namespace(key, allowed=(FEATURE_NS,))
    if value:
        check_label_value(value)
    if effect not in TAINT_EFFECTS:
        raise ValidationError(
            f"taint {key!r}: invalid effect {effect!r} (expected one of {', '.join(TAINT_EFFECTS)})"
        )


def add_namespace(m: Mapping[str, str], ns: str = FEATURE_NS) -> dict[str, str]:
    """nfd-master ``addNsToMapKeys``: prefix unprefixed keys.

    An explicitly prefixed key wins over an unprefixed one that maps to the same name.
    """
    out: dict[str, str] = {}
    for k, v in m.items():
        if "/" in k:
            out[k] = v
    for k, v in m.items():
        if "/" not in k:
            nk = f"{ns}/{k}"
            if nk not in m:
                out[nk] = v
    # keep the input order of keys for readable output
    return {k: out[k] for k in (k if "/" in k else f"{ns}/{k}" for k in m) if k in out}
