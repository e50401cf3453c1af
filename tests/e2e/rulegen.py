"""Hypothesis strategies for NodeFeatureRules and node features.

Small universes of feature, element and value names, so that generated rules
hit generated features often; every operator and value type, matchFeatures and
matchAny, matchName, static and dynamic (``@``) outputs, templates built from
range/if/with/index and Sprig pieces, vars and ``rule.matched`` chaining.
Some choices are invalid on purpose (wrong value counts, bad regexps, unknown
ops, bad label names, template errors): both engines must fail the same way.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

FLAG_FEATURES = ["dev.flag", "cpu.cpuid"]
ATTR_FEATURES = ["dev.attr", "kernel.config"]
INST_FEATURES = ["dev.inst", "pci.device"]
# A name present as flags and attributes at once (NFD matches across kinds).
MIXED = "dev.mixed"
TERM_FEATURES = [
    *FLAG_FEATURES,
    *ATTR_FEATURES,
    *INST_FEATURES,
    MIXED,
    "rule.matched",
    "dev.missing",
    "Dev.Attr",
    "nodot",
]
ELEMS = ["a", "b", "c", "n", "v1", "l1", "x.y"]
VALUES = [
    "",
    "0",
    "1",
    "2",
    "10",
    "-1",
    "007",
    "1.5",
    "1.2.3",
    "v1.2.3",
    "1.2.3-rc1",
    "2.0.0+b",
    "1.10",
    "true",
    "false",
    "True",
    "abc",
    "ABC",
    "10de",
    "a b",
    "x=y",
    "0x1f",
]
REGEXPS = [
    "^1",
    "a|b",
    "[0-9]+",
    "^v?1\\.",
    "(?i)abc",
    ".*",
    "",
    "\\d$",
    "^$",
    "b{2}",
    "^[a-z]+$",
    "1\\.2",
    "(",
    "a**",
    "[z-a]",
]
OPS = [
    "In",
    "NotIn",
    "InRegexp",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Ge",
    "Lt",
    "Le",
    "GtLt",
    "GeLe",
    "IsTrue",
    "IsFalse",
]
LABEL_KEYS = [
    "l1",
    "l2",
    "example.com/l3",
    "feature.node.kubernetes.io/l4",
    "sub.feature.node.kubernetes.io/l5",
    "kubernetes.io/l6",
    "bad key",
    "-bad",
]
VAR_KEYS = ["v1", "v2", "l1"]
DYNAMIC = ["@dev.attr.a", "@kernel.config.n", "@rule.matched.l1", "@dev.attr", "@dev.missing.a"]


# Strategies are built once and reused: building one per draw costs more than
# the draw itself (Hypothesis validates every new strategy object).
@functools.cache
def _pick(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


@functools.cache
def _int(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@functools.cache
def _subset(options: tuple[str, ...], lo: int, hi: int) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(options), min_size=lo, max_size=hi, unique=True)


@functools.cache
def _seq(options: tuple[str, ...], lo: int, hi: int) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(options), min_size=lo, max_size=hi)


_BOOL = st.booleans()


@st.composite
def features_doc(draw: st.DrawFn) -> dict[str, Any]:
    """A NodeFeature object with flags, attributes and instances."""

    def elems() -> list[str]:
        return draw(_subset(tuple(ELEMS), 0, 4))

    def attrs() -> dict[str, str]:
        return {e: draw(_pick(tuple(VALUES))) for e in elems()}

    present = _pick((True, True, True, False))
    flags = {f: {"elements": {e: {} for e in elems()}} for f in FLAG_FEATURES if draw(present)}
    attributes = {f: {"elements": attrs()} for f in ATTR_FEATURES if draw(present)}
    instances = {
        f: {"elements": [{"attributes": attrs()} for _ in range(draw(_int(0, 3)))]}
        for f in INST_FEATURES
        if draw(present)
    }
    if draw(_BOOL):
        flags[MIXED] = {"elements": {e: {} for e in elems()}}
        attributes[MIXED] = {"elements": attrs()}
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": "node-1"},
        "spec": {"features": {"flags": flags, "attributes": attributes, "instances": instances}},
    }


def expression(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(_pick((*OPS, "Bogus")) if draw(_int(0, 40)) == 0 else _pick(tuple(OPS)))
    want = {
        "In": (1, 3),
        "NotIn": (1, 3),
        "InRegexp": (1, 2),
        "Gt": (1, 1),
        "Ge": (1, 1),
        "Lt": (1, 1),
        "Le": (1, 1),
        "GtLt": (2, 2),
        "GeLe": (2, 2),
    }.get(op, (0, 0))
    lo, hi = want
    if draw(_int(0, 15)) == 0:  # a wrong number of values
        lo, hi = 0, 3
    pool = REGEXPS if op == "InRegexp" else VALUES
    values = draw(_seq(tuple(pool), lo, hi))
    expr: dict[str, Any] = {"op": op}
    if values or draw(_BOOL):
        expr["value"] = values
    t = draw(_pick(tuple(["", "", "", "", "version", "version", "bogus"])))
    if t:
        expr["type"] = t
    return expr


def safe_expression(draw: st.DrawFn) -> dict[str, Any]:
    """An expression that cannot raise an error for any feature value."""
    op = draw(_pick(("In", "NotIn", "InRegexp", "Exists", "DoesNotExist", "IsTrue", "IsFalse")))
    expr: dict[str, Any] = {"op": op}
    if op in ("In", "NotIn"):
        expr["value"] = draw(_seq(tuple(VALUES), 1, 3))
    elif op == "InRegexp":
        expr["value"] = draw(_seq(tuple(REGEXPS[:-3]), 1, 2))
    t = draw(_pick(tuple(["", "", "version"])))
    if t:
        expr["type"] = t
    return expr


def expression_set(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    """A matchExpressions map. NFD walks the map in Go's random order and stops at
    the first expression that fails, so with two or more expressions only ones
    that can never error are used (otherwise NFD itself gives different answers
    from run to run; see docs/rules.md)."""
    keys = draw(_subset(tuple(names), 0, 3))
    if len(keys) == 1:
        return {keys[0]: expression(draw) if draw(_BOOL) else safe_expression(draw)}
    return {k: safe_expression(draw) for k in keys}


def _known(features: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Element (and instance attribute) names of each feature present."""
    out: dict[str, set[str]] = {}
    f = features["spec"]["features"]
    for kind in ("flags", "attributes"):
        for name, fs in f[kind].items():
            out.setdefault(name, set()).update(fs["elements"])
    for name, fs in f["instances"].items():
        for inst in fs["elements"]:
            out.setdefault(name, set()).update(inst["attributes"])
    return {k: tuple(sorted(v)) for k, v in out.items() if v}


def term(
    draw: st.DrawFn, chain_names: list[str], known: dict[str, tuple[str, ...]]
) -> dict[str, Any]:
    # Mostly a feature the node has, named by its elements, so that rules match
    # (and templates run) often; otherwise anything.
    choice = draw(_int(0, 7))
    if chain_names and choice < 2:
        feature = "rule.matched"  # an earlier rule's labels and vars
    elif known and choice < 6:
        feature = draw(_pick(tuple(sorted(known))))
    else:
        feature = draw(_pick(tuple(TERM_FEATURES)))
    names = list(known.get(feature, ())) if draw(_int(0, 3)) != 0 else []
    names = names or (chain_names if feature == "rule.matched" and chain_names else ELEMS)
    t: dict[str, Any] = {"feature": feature}
    shape = draw(_int(0, 9))
    if shape != 0:  # 0: no matchExpressions at all
        t["matchExpressions"] = expression_set(draw, names)
    if shape in (0, 1) or draw(_int(0, 4)) == 0:
        t["matchName"] = expression(draw) if draw(_int(0, 4)) == 0 else safe_expression(draw)
    return t


PIECES = (
    "{{range .D.F}}t-{{.Name}}={{.Value}}\n{{end}}",
    "{{range $i, $e := .D.F}}f{{$i}}={{$e.Name}}\n{{end}}",
    "{{if .D.F}}has=yes{{else}}has=no{{end}}\n",
    "{{with index .D.F 0}}first={{.Name}}{{end}}\n",
    "{{with .D.F}}{{with index . 0}}first={{.Name}}{{end}}{{end}}\n",
    "n={{len .D.F}}\n",
    "{{range .D.F}}i-{{.a}}={{.b}}\n{{end}}",
    "{{range .D.F}}{{if .a}}ia-{{.a}}=x{{end}}\n{{end}}",
    '{{range .D.F}}{{.Name | upper}}={{.Value | default "none" | lower | trunc 3}}\n{{end}}',
    '{{range .D.F}}r-{{.Name}}={{ .Value | replace "." "-" | trimPrefix "v" }}\n{{end}}',
    '{{range .D.F}}{{ if hasPrefix "1" .Value }}p-{{.Name}}=one{{end}}\n{{end}}',
    '{{range .D.F}}{{.Name}}={{ regexReplaceAll "[^a-z0-9]" .Value "_" }}\n{{end}}',
    "{{range .D.F}}q-{{.Name}}={{ .Value | quote | len }}\n{{end}}",
    "{{ if eq (len .D.F) 2 }}two=true{{ end }}\n",
    "u={{ .D.F | len | add1 }}\n",
    'j={{ list "a" "b" | join "-" }}\n',
    'q={{ printf "%s-%d" "x" 3 }}\n',
    's={{ "a,b" | splitList "," | first }}\n',
    'c={{ atoi "12" | add 1 | mul 2 }}\n',
    'k={{ .D.F | len | toString | cat "n" | nospace }}\n',
    "static=value\n",
    "{{- /* comment */ -}} trimmed = spaced \n",
    "{{range .D.F}}{{ if ge (len .Name) 2 }}long-{{ .Name }}=true{{ end }}\n{{end}}",
)
# Pieces that fail: a line without "=", a missing map key, .Value on the
# data root, wrong argument types, a parse error.
BAD_PIECES = (
    "{{range .D.F}}{{.Name}}\n{{end}}",
    "x={{ .D.nosuch }}\n",
    "x={{ .Value }}\n",
    "{{ sub 5 .D.F }}=bad\n",
    '{{ "a" | trunc -1 }}=x\n',
    "{{range $k, $v := .}}dom-{{$k}}=true\n{{end}}",
    '{{ "unterminated" \n',
)


def _piece(draw: st.DrawFn, paths: list[tuple[str, str]], pieces: tuple[str, ...]) -> str:
    """One template fragment; ``D.F`` becomes a matched feature (or a random one)."""
    p = draw(_pick(pieces))
    if paths and draw(_int(0, 5)) != 0:
        d, f = draw(_pick(tuple(paths)))
    else:
        d, f = draw(_pick(tuple(TERM_FEATURES))).partition(".")[::2]
    if not f:
        return p.replace(".D.F", "." + d).replace(".D.nosuch", "." + d + ".nosuch")
    return p.replace(".D.F", f".{d}.{f}").replace(".D.nosuch", f".{d}.nosuch")


def template(draw: st.DrawFn, paths: list[tuple[str, str]]) -> str:
    parts = [_piece(draw, paths, PIECES) for _ in range(draw(_int(1, 2)))]
    if draw(_int(0, 5)) == 0:
        parts.insert(draw(_int(0, len(parts))), _piece(draw, paths, BAD_PIECES))
    return "".join(parts)


def rule(
    draw: st.DrawFn, name: str, chain_names: list[str], known: dict[str, tuple[str, ...]]
) -> dict[str, Any]:
    r: dict[str, Any] = {"name": name}
    mf = [term(draw, chain_names, known) for _ in range(draw(_pick((0, 1, 1, 1, 2, 2, 3))))]
    ma = [
        [term(draw, chain_names, known) for _ in range(draw(_int(1, 2)))]
        for _ in range(draw(_int(0, 2)) if draw(_int(0, 3)) == 0 else 0)
    ]
    if mf and known and draw(_int(0, 2)) != 0:
        # A term that matches every element of a feature the node has, so that
        # templates get data to range over.
        mf[0] = {
            "feature": draw(_pick(tuple(sorted(known)))),
            "matchName": {"op": "Exists"} if draw(_BOOL) else {"op": "InRegexp", "value": ["."]},
        }
    if mf:
        r["matchFeatures"] = mf
    if ma:
        r["matchAny"] = [{"matchFeatures": m} for m in ma]
    paths = [
        (t["feature"].partition(".")[0], t["feature"].partition(".")[2])
        for t in mf + [t for m in ma for t in m]
    ]
    value = _pick((*VALUES, *DYNAMIC))
    if draw(_int(0, 2)) != 0:
        r["labels"] = {k: draw(value) for k in draw(_subset(tuple(LABEL_KEYS), 0, 2))}
    if draw(_BOOL):
        r["labelsTemplate"] = template(draw, paths)
    if draw(_int(0, 2)) == 0:
        r["vars"] = {k: draw(value) for k in draw(_subset(tuple(VAR_KEYS), 0, 2))}
    if draw(_int(0, 4)) == 0:
        r["varsTemplate"] = template(draw, paths)
    if draw(_int(0, 6)) == 0:
        r["annotations"] = {
            k: draw(_pick(tuple(VALUES)))
            for k in draw(_subset(("a1", "example.com/a2", "kubernetes.io/a3", "bad key"), 0, 2))
        }
    if draw(_int(0, 6)) == 0:
        r["extendedResources"] = {
            k: draw(_pick(("1", "2", "10", "abc", "-1", "@dev.attr.a", "@dev.attr.n")))
            for k in draw(_subset(("e1", "example.com/e2", "bad key"), 0, 2))
        }
    if draw(_int(0, 8)) == 0:
        r["taints"] = [
            {
                "key": draw(_pick(tuple(["t1", "example.com/t2", "bad key"]))),
                "value": draw(_pick(tuple(["", "v", "v-1.2"]))),
                "effect": draw(_pick(tuple(["NoSchedule", "NoExecute", "PreferNoSchedule"]))),
            }
        ]
    return r


def rule_docs(draw: st.DrawFn, known: dict[str, tuple[str, ...]]) -> list[dict[str, Any]]:
    """One or two NodeFeatureRule objects; later rules may match ``rule.matched``."""
    docs = []
    n = 0
    chain: list[str] = []
    for obj in draw(_pick((("b-rules",), ("b-rules", "a-rules")))):
        rules = []
        for _ in range(draw(_int(1, 4))):
            n += 1
            r = rule(draw, f"rule-{n}", chain, known)
            chain.extend(k.rpartition("/")[2] for k in r.get("labels", {}))
            chain.extend(r.get("vars", {}))
            rules.append(r)
        docs.append(
            {
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeatureRule",
                "metadata": {"name": obj},
                "spec": {"rules": rules},
            }
        )
    return docs


@st.composite
def case(draw: st.DrawFn) -> dict[str, Any]:
    features = draw(features_doc())
    return {"rules": rule_docs(draw, _known(features)), "features": features}
