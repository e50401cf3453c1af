"""NFD match expressions: operators, value checks and the set matchers.

Semantics follow NFD's ``pkg/apis/nfd/nodefeaturerule``; the vectors are in
tests/data/nfd/expression-vectors-public.json.

- An unknown op is always an error.
- ``""`` for MatchAny, ``Exists`` and ``DoesNotExist`` check their value count and decide
  at once.
- Every other operator returns ``False`` *without error* when the element is missing or
  has no value, as a flag has none.
- It raises only when it actually compares a value.

Matched elements, the template input, are plain dicts:

- ``{"Name": k}`` for flags;
- ``{"Name": k, "Value": v}`` for attributes;
- the instance attribute map itself for instances.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from nfd_gpu.record import Record, record

log = logging.getLogger(__name__)

OPS: tuple[str, ...] = (
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
)
MATCH_ANY = ""
_ALL_OPS = frozenset((*OPS, MATCH_ANY))
_NO_VALUE_OPS = frozenset(("", "Exists", "DoesNotExist", "IsTrue", "IsFalse"))
_ONE_VALUE_OPS = frozenset(("Gt", "Ge", "Lt", "Le"))
_TWO_VALUE_OPS = frozenset(("GtLt", "GeLe"))
_LIST_OPS = frozenset(("In", "NotIn", "InRegexp"))
VALUE_TYPES = ("", "version")

MatchedElement = dict[str, str]


class ExpressionError(ValueError):
    """A match expression that cannot be evaluated; NFD returns an error."""


@record()
class MatchExpression(Record):
    """One ``{op, value, type}`` expression."""

    op: str
    value: tuple[str, ...] = ()
    type: str = ""

    def __str__(self) -> str:
        vals = " ".join(self.value)
        return f"{{op: {self.op or '(any)'}, value: [{vals}]}}"


# --------------------------------------------------------------------- helpers

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def go_atoi(s: str) -> int:
    """Go ``strconv.Atoi``: optional sign and decimal digits, 64-bit range."""
    if not (s.isascii() and s.isdigit()) and not _INT_RE.fullmatch(s):
        raise ExpressionError(f"not a number {s!r}")
    n = int(s)
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ExpressionError(f"number out of range {s!r}")
    return n


_SEMVER_RE = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
)
_UINT64_MAX = 2**64 - 1


def parse_version(s: str) -> tuple[int, int, int]:
    """Masterminds/semver v3 ``NewVersion``, loose, prerelease and build dropped."""
    m = _SEMVER_RE.fullmatch(s)
    if m is None:
        raise ExpressionError(f"invalid version {s!r}")
    parts = [m.group(1), (m.group(2) or ".0")[1:], (m.group(3) or ".0")[1:]]
    nums = [int(p) for p in parts]
    if any(n > _UINT64_MAX for n in nums):
        raise ExpressionError(f"invalid version {s!r}: number out of range")
    pre = m.group(5)
    if pre:
        for seg in pre.split("."):
            if seg.isdigit() and len(seg) > 1 and seg[0] == "0":
                raise ExpressionError(f"invalid version {s!r}: segment starts with 0")
    return nums[0], nums[1], nums[2]


# A rule's problem that is the host's, not the file's: the file stays valid, the rule is
# dropped (agent/rulefiles.py).
ENGINE_UNAVAILABLE = "regexp engine unavailable"


@lru_cache(maxsize=4096)
def compile_go_regexp(pattern: str) -> Any:
    """Compile a Go regexp with RE2 itself: ``google-re2``, cached.

    - Matching is linear in the input whatever the pattern: no backtracking.
    - What RE2 rejects raises ExpressionError, as NFD does: lookaround, backreferences, ``\\Z``.
    - So does an RE2 that cannot load. The rule with the regexp is dropped, not the scan.
    """
    try:
        import re2  # lazy: the RE2 extension (~6 ms) only for rules with regexps
    except ImportError as e:
        raise ExpressionError(f"{ENGINE_UNAVAILABLE} (google-re2: {e})") from None
    try:
        return re2.compile(pattern, _RE2_OPTIONS())
    except re2.error as e:
        msg = e.args[0] if e.args else str(e)
        if isinstance(msg, bytes):
            msg = msg.decode("utf-8", "replace")
        raise ExpressionError(f"invalid regexp {pattern!r}: {msg}") from None


@lru_cache(maxsize=1)
def _RE2_OPTIONS() -> Any:
    import re2  # lazy: google-re2, the engine Go's regexp implements, only for regexps

    opts = re2.Options()
    opts.log_errors = False  # errors are raised, not printed to stderr
    return opts


# ------------------------------------------------------------------ validation


def validate_expression(expr: MatchExpression, allow_match_any: bool = False) -> None:
    """Strict, load-time check of an expression: what ``rules check`` reports.

    Raises ExpressionError for:

    - an unknown operator;
    - a wrong value count;
    - an invalid regexp;
    - a non-integer value for an integer comparison;
    - an empty or reversed range;
    - an invalid version;
    - an unknown ``type``.

    The internal MatchAny op ``""`` is not in the CRD enum. It is accepted only with
    ``allow_match_any``: NFD's legacy ``custom`` source API allows it.
    """
    op, values = expr.op, expr.value
    if op not in _ALL_OPS or (op == MATCH_ANY and not allow_match_any):
        raise ExpressionError(f"unknown operator {op!r} (expected one of {', '.join(OPS)})")
    if expr.type not in VALUE_TYPES:
        raise ExpressionError(f"unknown type {expr.type!r} (only 'version' is defined)")
    if op in _NO_VALUE_OPS:
        if values:
            raise ExpressionError(f"operator {op} takes no values (have {len(values)})")
        return
    if op in _LIST_OPS:
        if not values:
            raise ExpressionError(f"operator {op} needs at least one value")
        if op == "InRegexp":
            for v in values:
                compile_go_regexp(v)
        return
    want = 1 if op in _ONE_VALUE_OPS else 2
    if len(values) != want:
        raise ExpressionError(
            f"operator {op} needs exactly {want} value{'s' if want > 1 else ''} "
            f"(have {len(values)})"
        )
    if expr.type == "version":
        for v in values:
            parse_version(v)
        return
    nums = [go_atoi(v) for v in values]
    if want == 2 and nums[0] >= nums[1]:
        raise ExpressionError(
            f"operator {op} needs value[0] < value[1] (have {nums[0]}, {nums[1]})"
        )


# ------------------------------------------------------------------ evaluation

Evaluator = Callable[[bool, "str | None"], bool]


def _fail(msg: str) -> Evaluator:
    def ev(valid: bool, value: str | None) -> bool:
        raise ExpressionError(msg)

    return ev


_MEMO_MAX = 1024


def _guarded(inner: Callable[[str], bool]) -> Evaluator:
    """False for a missing value, else ``inner(value)``.

    - ``inner`` is pure, so its results are memoised per value.
    - So 16 identical GPUs convert "81559" once.
    - An error is never stored, so it is raised again on every call, as before.
    """
    memo: dict[str, bool] = {}

    def ev(valid: bool, value: str | None) -> bool:
        if not valid or value is None:
            return False
        r = memo.get(value)
        if r is None:
            r = inner(value)
            if len(memo) >= _MEMO_MAX:
                memo.clear()
            memo[value] = r
        return r

    return ev


def _compare_op(op: str, values: tuple[str, ...], vtype: str) -> Callable[[str], bool]:
    want = 1 if op in _ONE_VALUE_OPS else 2
    conv: Callable[[str], object]
    if vtype == "version":
        conv = parse_version
    elif vtype == "":
        conv = go_atoi
    else:
        msg = f"invalid type {vtype!r} for Op {op!r}"

        def bad_type(s: str) -> bool:
            raise ExpressionError(msg)

        return bad_type

    count_error: ExpressionError | None = None
    bound_error: ExpressionError | None = None
    bounds: list[Any] = []
    if len(values) != want:
        count_error = ExpressionError(
            f"invalid expression, 'value' field must contain exactly {want} "
            f"element(s) for Op {op!r} (have {list(values)})"
        )
    else:
        try:
            bounds = [conv(v) for v in values]
            if want == 2 and vtype == "" and bounds[0] >= bounds[1]:
                bound_error = ExpressionError(
                    f"invalid expression, value[0] must be less than value[1] for Op {op!r} "
                    f"(have {list(values)})"
                )
        except ExpressionError as e:
            bound_error = e

    def run(s: str) -> bool:
        if count_error is not None:
            raise count_error
        x: Any = conv(s)
        if bound_error is not None:
            raise bound_error
        lo = bounds[0]
        if op == "Gt":
            return bool(x > lo)
        if op == "Ge":
            return bool(x >= lo)
        if op == "Lt":
            return bool(x < lo)
        if op == "Le":
            return bool(x <= lo)
        hi = bounds[1]
        if op == "GtLt":
            return bool(lo < x < hi)
        return bool(lo <= x <= hi)

    return run


@lru_cache(maxsize=16384)
def compile_expression(expr: MatchExpression) -> Evaluator:
    """Turn an expression into ``f(valid, value) -> bool`` with NFD's exact behaviour.

    It returns false or raises an error exactly where NFD does.
    """
    op, values = expr.op, expr.value
    if op not in _ALL_OPS:
        return _fail(f"invalid Op {op!r}")
    if op in ("", "Exists", "DoesNotExist"):
        if values:
            return _fail(
                f"invalid expression, 'value' field must be empty for Op {op!r} "
                f"(have {list(values)})"
            )
        if op == "":
            return lambda valid, value: True
        if op == "Exists":
            return lambda valid, value: valid
        return lambda valid, value: not valid

    inner: Callable[[str], bool]
    if op in _LIST_OPS and not values:
        msg = f"invalid expression, 'value' field must be non-empty for Op {op!r}"

        def empty(s: str) -> bool:
            raise ExpressionError(msg)

        inner = empty
    elif op == "In":
        vs = frozenset(values)
        return lambda valid, value: valid and value is not None and value in vs
    elif op == "NotIn":
        vs = frozenset(values)
        return lambda valid, value: valid and value is not None and value not in vs
    elif op == "InRegexp":
        try:
            pats = [compile_go_regexp(v) for v in values]
            re_error: ExpressionError | None = None
        except ExpressionError as e:
            pats, re_error = [], e

        def regexp(s: str) -> bool:
            if re_error is not None:
                raise re_error
            return any(p.search(s) is not None for p in pats)

        inner = regexp
    elif op in _ONE_VALUE_OPS or op in _TWO_VALUE_OPS:
        inner = _compare_op(op, values, expr.type)
    else:  # IsTrue / IsFalse
        if values:
            msg = f"invalid expression, 'value' field must be empty for Op {op!r}"

            def nonempty(s: str) -> bool:
                raise ExpressionError(msg)

            inner = nonempty
        else:
            want = "true" if op == "IsTrue" else "false"
            inner = want.__eq__
    return _guarded(inner)


# --------------------------------------------------------------- set matchers
# One implementation, compiled: expressions are compiled once at rule load time
# (``compile_expressions``), instance attribute maps extracted once per evaluation.

ExpressionSet = Sequence[tuple[str, MatchExpression]]


def _by_name(e: MatchedElement) -> str:
    return e["Name"]


InstancePredicate = Callable[[Mapping[str, str]], bool]


def instance_predicate(name: str, expr: MatchExpression) -> InstancePredicate:
    """``pred(attrs)``: ``expr`` on element ``name`` of one instance's attribute map.

    - That is ``ev(name in attrs, attrs[name])``.
    - The common In, NotIn, Exists and DoesNotExist forms take direct fast paths.
    - They give the same results, with no extra calls.
    """
    op, values = expr.op, expr.value
    if op == "In" and values:
        vs = frozenset(values)
        return lambda a: a.get(name) in vs  # None is never in vs
    if op == "NotIn" and values:
        vs = frozenset(values)

        def not_in(a: Mapping[str, str]) -> bool:
            v = a.get(name)
            return v is not None and v not in vs

        return not_in
    if op == "Exists" and not values:
        return lambda a: a.get(name) is not None
    if op == "DoesNotExist" and not values:
        return lambda a: a.get(name) is None
    ev = compile_expression(expr)

    def generic(a: Mapping[str, str]) -> bool:
        v = a.get(name)
        return ev(v is not None, v)

    return generic


@record()
class CompiledExpressions(Record):
    """A ``matchExpressions`` set compiled once, at rule load time."""

    exprs: tuple[tuple[str, MatchExpression], ...]
    evaluators: tuple[tuple[str, str, Evaluator], ...]  # (name, op, evaluator)
    predicates: tuple[InstancePredicate, ...]


def compile_expressions(exprs: ExpressionSet) -> CompiledExpressions:
    items = tuple(exprs)
    return CompiledExpressions(
        items,
        tuple((name, e.op, compile_expression(e)) for name, e in items),
        tuple(instance_predicate(name, e) for name, e in items),
    )


def instance_attributes(
    instances: Iterable[Mapping[str, Any]] | None,
) -> list[Mapping[str, str]]:
    """The attribute map of each instance, what templates see, in input order."""
    return [inst.get("attributes") or {} for inst in instances or ()]


def _match_instances(
    preds: Sequence[InstancePredicate],
    attrs_list: Sequence[Mapping[str, str]],
    fail_fast: bool,
) -> tuple[bool, list[MatchedElement]]:
    """NFD ``MatchGetInstances``: the instances matching *all* expressions, in input order.

    Evaluation order is NFD's: instance by instance, expressions in order. It stops at the
    first false one with ``fail_fast``.
    """
    out: list[Any]
    if not preds:
        out = list(attrs_list)
    elif fail_fast and len(preds) == 1:
        p0 = preds[0]
        out = [a for a in attrs_list if p0(a)]
    elif fail_fast and len(preds) == 2:
        p0, p1 = preds
        out = [a for a in attrs_list if p0(a) and p1(a)]
    elif fail_fast:
        out = [a for a in attrs_list if all(p(a) for p in preds)]
    else:
        out = [a for a in attrs_list if all([p(a) for p in preds])]
    return bool(out), out


def _match_element(
    name: str,
    op: str,
    ev: Evaluator,
    keys: Collection[str] | None,
    values: Mapping[str, str] | None,
    elems: list[MatchedElement],
) -> bool:
    """One expression on element ``name`` of the flags and the attributes.

    - What matched is appended to ``elems``.
    - ``DoesNotExist`` must hold on both sides.
    """
    mk = mv = False
    if keys is not None:
        mk = ev(name in keys, None)
        if mk:
            elems.append({"Name": name})
        elif op == "DoesNotExist":
            return False
    if values is not None:
        if name in values:
            v = values[name]
            mv = ev(True, v)
        else:
            v = ""
            mv = ev(False, None)
        if mv:
            elems.append({"Name": name, "Value": v})
        elif op == "DoesNotExist":
            return False
    return mk or mv


def match_multi(
    compiled: CompiledExpressions,
    keys: Collection[str] | None,
    values: Mapping[str, str] | None,
    attrs_list: Sequence[Mapping[str, str]] | None,
    fail_fast: bool = True,
) -> tuple[bool, list[MatchedElement]]:
    """NFD ``MatchMulti``: flags and attributes as a union, instances separately.

    - ``DoesNotExist`` must hold in both flags and attributes.
    - The term matches if either side does.
    - With ``fail_fast`` the first failing expression empties the flag and attribute side.
    """
    elems: list[MatchedElement] = []
    is_match = keys is not None or values is not None
    if is_match:
        for name, op, ev in compiled.evaluators:
            if not _match_element(name, op, ev, keys, values, elems):
                is_match = False
                if fail_fast:
                    elems = []
                    break
        if len(elems) > 1:
            elems.sort(key=_by_name)
    if not attrs_list:
        return is_match, elems
    mi, ielems = _match_instances(compiled.predicates, attrs_list, fail_fast)
    return is_match or mi, elems + ielems


def match_names_multi(
    expr: MatchExpression,
    keys: Collection[str] | None,
    values: Mapping[str, str] | None,
    attrs_list: Sequence[Mapping[str, str]] | None,
) -> tuple[bool, list[MatchedElement]]:
    """NFD ``MatchNamesMulti``: ``matchName`` over flag, attribute and instance names.

    The instances are given as their attribute maps.
    """
    ev = compile_expression(expr)
    out: list[MatchedElement] = [{"Name": k} for k in (keys or ()) if ev(True, k)]
    out.extend({"Name": k, "Value": v} for k, v in (values or {}).items() if ev(True, k))
    out.sort(key=_by_name)
    for attrs in attrs_list or ():
        # every name is evaluated, as NFD does: an error on a later name still raises
        if [k for k in attrs if ev(True, k)]:
            out.append(dict(attrs))
    return bool(out), out
