"""Kubernetes name rules: what a label name, label value, prefix and allowed namespace are.

The prefix is the qualified-name prefix. This is the one place that says it.

- Both validators read it: ``labels/validate.py`` checks every label a profile emits;
  ``rules/validate.py`` checks rule output, as nfd-master filters it.
  They only word the errors, each in its own established form.
- :func:`sanitize_value` makes any string a valid value or name part.
  The node summary writes such values: product names, versions.

The rules:

- Name part: 1-63 characters, ``([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]``.
  That is k8s ``IsQualifiedName``. A label value is empty or the same shape.
- Prefix: a lower-case DNS-1123 subdomain of at most 253 characters.
  That is also the rule of a Node's and a Pod's name.
- A namespace's name is a DNS-1123 label of at most 63.
- Namespaces, by nfd-master's default policy: ``kubernetes.io`` and ``*.kubernetes.io``
  are denied. The exceptions are the NFD namespaces ``feature.node.kubernetes.io``,
  ``profile.node.kubernetes.io`` and their sub-namespaces.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from nfd_gpu.record import Record, record

NAME_MAX = 63
PREFIX_MAX = 253
FEATURE_NS = "feature.node.kubernetes.io"
PROFILE_NS = "profile.node.kubernetes.io"
NFD_NAMESPACES = (FEATURE_NS, PROFILE_NS)

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL)


def is_name_shape(s: str) -> bool:
    """Tell a name shape: non-empty, alphanumeric ends, ``[-A-Za-z0-9_.]`` inside; any length."""
    return _NAME_RE.fullmatch(s) is not None


def is_dns1123_subdomain(s: str) -> bool:
    """Tell a qualified name's prefix: lower-case DNS-1123 subdomain, at most 253 characters."""
    return len(s) <= PREFIX_MAX and _DNS1123_SUBDOMAIN_RE.fullmatch(s) is not None


def is_dns1123_label(s: str) -> bool:
    """Tell a namespace's name: a lower-case DNS-1123 label, at most 63 characters."""
    return len(s) <= NAME_MAX and _DNS1123_LABEL_RE.fullmatch(s) is not None


def namespace_allowed(ns: str, allowed: Collection[str] = NFD_NAMESPACES) -> bool:
    """Apply nfd-master's rule to namespace ``ns``.

    ``kubernetes.io`` and ``*.kubernetes.io`` are allowed only when ``ns`` is one of
    ``allowed`` or a sub-namespace of one. Any other namespace is allowed.
    """
    if ns == "kubernetes.io" or ns.endswith(".kubernetes.io"):
        return any(ns == a or ns.endswith("." + a) for a in allowed)
    return True


# A run of characters outside [A-Za-z0-9._-] (absorbing dashes next to it) -> one "-".
_BAD_RUN_RE = re.compile(r"-*[^A-Za-z0-9._-]+(?:-*[^A-Za-z0-9._-]+)*-*")
_EDGE_RE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def sanitize_value(value: str, limit: int = NAME_MAX) -> str:
    """Make any string a valid label value or name part.

    - Keeps ``[A-Za-z0-9._-]``.
    - Turns each run of anything else into one ``-``.
    - Trims to ``limit`` characters and to alphanumeric ends.
    - May return ``""``.
    """
    s = _BAD_RUN_RE.sub("-", value)
    s = _EDGE_RE.sub("", s)
    if len(s) > limit:
        s = _EDGE_RE.sub("", s[:limit])
    return s


@record()
class LabelDoc(Record):
    """One documented label key of a profile: its pattern, values and meaning."""

    key: str  # pattern; <...> marks a variable part
    value: str
    description: str

    def regex(self) -> re.Pattern[str]:
        parts = re.split(r"(<[^>]+>)", self.key)
        body = "".join("[A-Za-z0-9._-]+" if p.startswith("<") else re.escape(p) for p in parts)
        return re.compile(f"^{body}$")
