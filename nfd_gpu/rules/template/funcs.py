"""The functions a rule template can call: Go's text/template built-ins and NFD's Sprig functions.

- NFD v0.19.0 allows Sprig's ``TxtFuncMap`` without ``env``, ``expandenv`` and
  ``getHostByName``: see its ``pkg/apis/nfd/template``.
- nfd-gpu implements some of them. tests/data/template/functions.yaml lists which,
  and why not the rest.
- Every function that builds a string or list checks its size first.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nfd_gpu.rules.expressions import ExpressionError, compile_go_regexp, go_atoi
from nfd_gpu.rules.template.fmt import go_sprint, go_sprintf
from nfd_gpu.rules.template.limits import MAX_OUTPUT_SIZE, MAX_VALUE_SIZE, TemplateError
from nfd_gpu.rules.template.values import (
    go_quote,
    go_repr,
    go_type,
    int64,
    strval,
    to_float,
    to_int,
    truth,
)

# Go types the comparison functions accept (Go's basicKind: no nil, map or slice)
_COMPARABLE = frozenset(("bool", "int", "float64", "string"))


def _cmp_check(a: Any, b: Any) -> None:
    ta, tb = go_type(a), go_type(b)
    if ta not in _COMPARABLE or tb not in _COMPARABLE:
        raise TemplateError(f"invalid type for comparison: {ta} and {tb}")
    if ta != tb:
        raise TemplateError("incompatible types for comparison")


def _eq(a: Any, *bs: Any) -> bool:
    if not bs:
        raise TemplateError("missing argument for comparison")
    for b in bs:
        _cmp_check(a, b)
        if a == b:
            return True
    return False


def _ne(a: Any, b: Any) -> bool:
    return not _eq(a, b)


def _lt(a: Any, b: Any) -> bool:
    _cmp_check(a, b)
    if isinstance(a, bool):
        raise TemplateError("invalid type for comparison")
    return bool(a < b)


def _le(a: Any, b: Any) -> bool:
    return _lt(a, b) or _eq(a, b)


def _gt(a: Any, b: Any) -> bool:
    return not _le(a, b)


def _ge(a: Any, b: Any) -> bool:
    return not _lt(a, b)


def _not(a: Any) -> bool:
    return not truth(a)


def _len(a: Any) -> int:
    if isinstance(a, str):
        return len(a.encode())
    if isinstance(a, (list, tuple, Mapping)):
        return len(a)
    raise TemplateError(f"len of type {go_type(a)}")


def _zero_for(container: Mapping[Any, Any]) -> Any:
    vals = list(container.values())
    if not vals or all(isinstance(v, str) for v in vals):
        return ""
    return None


def _index(item: Any, *idx: Any) -> Any:
    cur = item
    for i in idx:
        if isinstance(cur, Mapping):
            if not isinstance(i, str):
                raise TemplateError(f"index: value has type {go_type(i)}; should be string")
            cur = cur[i] if i in cur else _zero_for(cur)
        elif isinstance(cur, (list, tuple, str)):
            if isinstance(i, bool) or not isinstance(i, int):
                raise TemplateError(f"cannot index slice/array with type {go_type(i)}")
            seq: Sequence[Any] = cur.encode() if isinstance(cur, str) else cur
            if not 0 <= i < len(seq):
                raise TemplateError(f"error calling index: index out of range: {i}")
            cur = seq[i]
        elif cur is None:
            raise TemplateError("index of untyped nil")
        else:
            raise TemplateError(f"can't index item of type {go_type(cur)}")
    return cur


def _slice(item: Any, *idx: Any) -> Any:
    if not isinstance(item, (list, tuple, str)):
        raise TemplateError(f"can't slice item of type {go_type(item)}")
    if len(idx) > 2:
        raise TemplateError("too many slice indexes")
    ints = [int(i) for i in idx]
    lo = ints[0] if ints else 0
    hi = ints[1] if len(ints) > 1 else len(item)
    if not 0 <= lo <= hi <= len(item):
        raise TemplateError(f"error calling slice: index out of range: {lo}:{hi}")
    return item[lo:hi]


def _atoi(s: Any) -> int:
    try:
        return go_atoi(strval(s))
    except ExpressionError:
        return 0


def _list(*a: Any) -> list[Any]:
    return list(a)


def _as_list(v: Any, fn: str) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return list(v)
    if v is None:
        return []
    raise TemplateError(f"{fn}: cannot find {fn} on type {go_type(v)}")


def _dict(*a: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(0, len(a), 2):
        out[strval(a[i])] = a[i + 1] if i + 1 < len(a) else ""
    return out


def _title(s: Any) -> str:
    s = strval(s)
    out: list[str] = []
    prev = " "
    for ch in s:
        out.append(ch.upper() if not (prev.isalnum() or prev in "_'") else ch)
        prev = ch
    return "".join(out)


def _words_case(s: str, sep: str) -> str:
    parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", s)
    return sep.join(p.lower() for p in parts)


def _camel(s: Any) -> str:
    parts = re.split(r"[_\-\s]+", strval(s))
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def _substr(start: Any, end: Any, text: Any) -> str:
    s, a, b = strval(text), to_int(start), to_int(end)
    if a < 0:
        return s[:b]
    if b < 0 or b > len(s):
        return s[a:]
    return s[a:b]


def _trunc(c: Any, text: Any) -> str:
    s, n = strval(text), to_int(c)
    if n < 0 and len(s) + n > 0:
        return s[len(s) + n :]
    if n >= 0 and len(s) > n:
        return s[:n]
    return s


def _abbrev(width: Any, text: Any) -> str:
    s, w = strval(text), to_int(width)
    if w < 4 or len(s) <= w:
        return s
    return s[: w - 3] + "..."


def _split(sep: Any, s: Any) -> dict[str, str]:
    return {f"_{i}": p for i, p in enumerate(strval(s).split(strval(sep)))}


def _splitn(sep: Any, n: Any, s: Any) -> dict[str, str]:
    k = to_int(n)
    parts = strval(s).split(strval(sep), k - 1) if k > 0 else []
    return {f"_{i}": p for i, p in enumerate(parts)}


def _split_list(sep: Any, s: Any) -> list[str]:
    sep_s = strval(sep)
    if sep_s == "":
        return list(strval(s))
    return strval(s).split(sep_s)


def _join(sep: Any, v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return strval(sep).join(strval(x) for x in v if x is not None)
    return strval(v)


def _indent(n: Any, s: Any) -> str:
    k = max(to_int(n), 0)
    text = strval(s)
    if k * (text.count("\n") + 1) + len(text) > MAX_VALUE_SIZE:
        raise TemplateError(f"indent: result larger than {MAX_VALUE_SIZE} bytes")
    pad = " " * k
    return pad + strval(s).replace("\n", "\n" + pad)


def _replace(old: str, new: str, s: str) -> str:
    hits = len(s) + 1 if old == "" else s.count(old)
    if len(s) + hits * len(new) > MAX_VALUE_SIZE:
        raise TemplateError(f"replace: result larger than {MAX_VALUE_SIZE} bytes")
    return s.replace(old, new)


def _repeat(n: Any, s: Any) -> str:
    k = to_int(n)
    if k < 0 or k * len(strval(s)) > MAX_OUTPUT_SIZE:
        raise TemplateError("repeat: result too large")
    return strval(s) * k


def _default(d: Any, *given: Any) -> Any:
    if not given or not truth(given[0]):
        return d
    return given[0]


def _empty(v: Any) -> bool:
    return not truth(v)


def _coalesce(*vs: Any) -> Any:
    for v in vs:
        if truth(v):
            return v
    return None


def _ternary(t: Any, f: Any, cond: Any) -> Any:
    return t if truth(cond) else f


def _re(pattern: Any) -> Any:
    try:
        return compile_go_regexp(strval(pattern))
    except ExpressionError as e:
        raise TemplateError(str(e)) from None


def _regex_find_all(pattern: Any, s: Any, n: Any) -> list[str]:
    found = [m.group(0) for m in _re(pattern).finditer(strval(s))]
    k = to_int(n)
    return found if k < 0 else found[:k]


def _go_repl(repl: str) -> str:
    # Go's Expand uses $1 / ${1} / ${name}; Python uses \1 / \g<1>.
    out = repl.replace("\\", "\\\\")
    out = re.sub(r"\$\{([A-Za-z0-9_]+)\}", r"\\g<\1>", out)
    return re.sub(r"\$([0-9]+)", r"\\g<\1>", out)


def _check_sub(rx: Any, text: str, repl: str) -> None:
    """Refuse a substitution whose result could pass MAX_VALUE_SIZE, before building it."""
    if not repl:
        return
    hits = sum(1 for _ in rx.finditer(text))
    if len(text) + hits * len(repl) > MAX_VALUE_SIZE:
        raise TemplateError(f"result larger than {MAX_VALUE_SIZE} bytes")


def _regex_replace_all(pattern: Any, s: Any, repl: Any) -> str:
    rx, text, r = _re(pattern), strval(s), strval(repl)
    _check_sub(rx, text, r)
    try:
        return str(rx.sub(_go_repl(r), text))
    except (re.error, IndexError, ValueError) as e:
        raise TemplateError(f"regexReplaceAll: {e}") from None


def _regex_replace_literal(pattern: Any, s: Any, repl: Any) -> str:
    rx, text, r = _re(pattern), strval(s), strval(repl)
    _check_sub(rx, text, r)
    return str(rx.sub(lambda m: r, text))


def _regex_split(pattern: Any, s: Any, n: Any) -> list[str]:
    k = to_int(n)
    if k == 0:
        return []
    parts: list[str] = _re(pattern).split(strval(s), maxsplit=0 if k < 0 else k - 1)
    return parts


def _until(n: Any) -> list[int]:
    k = to_int(n)
    if k > 10_000:
        raise TemplateError("until: too many elements")
    return list(range(k)) if k >= 0 else list(range(0, k, -1))


def _max(a: Any, *rest: Any) -> int:
    return max([to_int(a), *(to_int(x) for x in rest)])


def _min(a: Any, *rest: Any) -> int:
    return min([to_int(a), *(to_int(x) for x in rest)])


def _mul(a: Any, *b: Any) -> int:
    out = to_int(a)
    for x in b:
        out = int64(out * to_int(x))  # wraps at every step, as Go does
    return out


def _div(a: Any, b: Any) -> int:
    x, y = to_int(a), to_int(b)
    if y == 0:
        raise TemplateError("integer divide by zero")
    q = abs(x) // abs(y)
    return int64(q if (x >= 0) == (y >= 0) else -q)


def _mod(a: Any, b: Any) -> int:
    x, y = to_int(a), to_int(b)
    if y == 0:
        raise TemplateError("integer divide by zero")
    return x - _div(x, y) * y


def _uniq(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in _as_list(v, "uniq"):
        if x not in out:
            out.append(x)
    return out


def _has(needle: Any, hay: Any) -> bool:
    return needle in _as_list(hay, "has")


def _first(v: Any) -> Any:
    lst = _as_list(v, "first")
    return lst[0] if lst else None


def _last(v: Any) -> Any:
    lst = _as_list(v, "last")
    return lst[-1] if lst else None


def _keys(*ds: Any) -> list[str]:
    out: list[str] = []
    for d in ds:
        if isinstance(d, Mapping):
            out.extend(d.keys())
    return out


def _get(d: Any, k: Any) -> Any:
    if isinstance(d, Mapping):
        return d.get(strval(k), "")
    return ""


def _has_key(d: Any, k: Any) -> bool:
    return isinstance(d, Mapping) and strval(k) in d


def _b64dec(s: Any) -> str:
    try:
        return base64.b64decode(strval(s), validate=True).decode("utf-8", "replace")
    except ValueError as e:
        return str(e)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # text/template builtins (and/or are handled by the executor: short-circuit)
    "and": lambda *a: a[-1],
    "or": lambda *a: a[-1],
    "not": _not,
    "len": _len,
    "index": _index,
    "slice": _slice,
    "eq": _eq,
    "ne": _ne,
    "lt": _lt,
    "le": _le,
    "gt": _gt,
    "ge": _ge,
    "print": go_sprint,
    "printf": go_sprintf,
    "println": lambda *a: " ".join(go_repr(x) for x in a) + "\n",
    # Sprig: strings
    "upper": lambda s: strval(s).upper(),
    "lower": lambda s: strval(s).lower(),
    "title": _title,
    "untitle": lambda s: " ".join(w[:1].lower() + w[1:] for w in strval(s).split(" ")),
    "trim": lambda s: strval(s).strip(),
    "trimAll": lambda c, s: strval(s).strip(strval(c)),
    "trimall": lambda c, s: strval(s).strip(strval(c)),
    "trimPrefix": lambda p, s: strval(s).removeprefix(strval(p)),
    "trimSuffix": lambda p, s: strval(s).removesuffix(strval(p)),
    "replace": lambda o, n, s: _replace(strval(o), strval(n), strval(s)),
    "contains": lambda sub, s: strval(sub) in strval(s),
    "hasPrefix": lambda p, s: strval(s).startswith(strval(p)),
    "hasSuffix": lambda p, s: strval(s).endswith(strval(p)),
    "repeat": _repeat,
    "substr": _substr,
    "trunc": _trunc,
    "abbrev": _abbrev,
    "nospace": lambda s: "".join(strval(s).split()),
    "initials": lambda s: "".join(w[0] for w in strval(s).split()),
    "quote": lambda *a: " ".join(go_quote(strval(x)) for x in a if x is not None),
    "squote": lambda *a: " ".join(f"'{strval(x)}'" for x in a if x is not None),
    "cat": lambda *a: " ".join(strval(x) for x in a if x is not None),
    "indent": _indent,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "snakecase": lambda s: _words_case(strval(s), "_"),
    "kebabcase": lambda s: _words_case(strval(s), "-"),
    "camelcase": _camel,
    "swapcase": lambda s: strval(s).swapcase(),
    "plural": lambda one, many, n: strval(one) if to_int(n) == 1 else strval(many),
    "toString": strval,
    "toStrings": lambda v: [strval(x) for x in _as_list(v, "toStrings")],
    "join": _join,
    "split": _split,
    "splitn": _splitn,
    "splitList": _split_list,
    "sortAlpha": lambda v: sorted(strval(x) for x in _as_list(v, "sortAlpha")),
    "regexMatch": lambda p, s: _re(p).search(strval(s)) is not None,
    "regexFind": lambda p, s: m.group(0) if (m := _re(p).search(strval(s))) else "",
    "regexFindAll": _regex_find_all,
    "regexReplaceAll": _regex_replace_all,
    "regexReplaceAllLiteral": _regex_replace_literal,
    "regexSplit": _regex_split,
    "b64enc": lambda s: base64.b64encode(strval(s).encode()).decode(),
    "b64dec": _b64dec,
    "sha256sum": lambda s: hashlib.sha256(strval(s).encode()).hexdigest(),
    "sha1sum": lambda s: hashlib.sha1(strval(s).encode()).hexdigest(),
    # Sprig: defaults and logic
    "default": _default,
    "empty": _empty,
    "coalesce": _coalesce,
    "ternary": _ternary,
    # Sprig: conversion and math
    "atoi": _atoi,
    "int": to_int,
    "int64": to_int,
    "float64": to_float,
    "add": lambda *a: int64(sum(to_int(x) for x in a)),
    "add1": lambda a: int64(to_int(a) + 1),
    "sub": lambda a, b: int64(to_int(a) - to_int(b)),
    "mul": _mul,
    "div": _div,
    "mod": _mod,
    "max": _max,
    "min": _min,
    "until": _until,
    "seq": lambda *a: " ".join(str(x) for x in range(to_int(a[0]) if len(a) == 1 else 1)),
    # Sprig: lists and dicts
    "list": _list,
    "first": _first,
    "last": _last,
    "rest": lambda v: _as_list(v, "rest")[1:],
    "initial": lambda v: _as_list(v, "initial")[:-1],
    "uniq": _uniq,
    "has": _has,
    "compact": lambda v: [x for x in _as_list(v, "compact") if truth(x)],
    "without": lambda v, *w: [x for x in _as_list(v, "without") if x not in w],
    "append": lambda v, x: [*_as_list(v, "append"), x],
    "dict": _dict,
    "get": _get,
    "hasKey": _has_key,
    "keys": _keys,
}
del FUNCTIONS["seq"]  # Sprig's seq has shell-like arity rules; not worth a partial port


def _arity(sig: inspect.Signature) -> tuple[int, float]:
    """Return the min and max positional arguments ``sig.bind(*args)`` accepts."""
    lo, hi = 0, 0.0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            hi += 1
            if p.default is p.empty:
                lo += 1
        elif p.kind is p.VAR_POSITIONAL:
            hi = float("inf")
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:  # pragma: no cover
            raise ValueError("keyword-only parameter")
    return lo, hi


ARITY: dict[str, tuple[int, float]] = {}
for _name, _fn in FUNCTIONS.items():
    with contextlib.suppress(TypeError, ValueError):  # builtins without a signature
        ARITY[_name] = _arity(inspect.signature(_fn))
