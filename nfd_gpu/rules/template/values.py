"""Go values as the interpreter sees them.

- ``%v`` formatting, type names, truth;
- ``strconv.Quote``;
- Sprig's string and int conversions;
- int64 wrapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nfd_gpu.rules.template.limits import MAX_VALUE_SIZE, TemplateError

_INT64 = 1 << 64


def go_repr(v: Any, top: bool = False) -> str:
    """Format a value like Go's ``fmt`` ``%v``; containers print at most MAX_VALUE_SIZE."""
    if isinstance(v, (Mapping, list, tuple)):
        budget = [MAX_VALUE_SIZE]
        return _repr_bounded(v, budget)
    return _go_repr(v, top)


def _repr_bounded(v: Any, budget: list[int]) -> str:
    """Format nested containers as %v; raise TemplateError once the text passes the budget.

    Lists that contain themselves many times over would otherwise print exponentially.
    """
    if isinstance(v, Mapping):
        parts = [f"{_repr_bounded(k, budget)}:{_repr_bounded(v[k], budget)}" for k in sorted(v)]
        s = "map[" + " ".join(parts) + "]"
    elif isinstance(v, (list, tuple)):
        s = "[" + " ".join(_repr_bounded(x, budget) for x in v) + "]"
    else:
        s = _go_repr(v, False)
    budget[0] -= len(s)
    if budget[0] < 0:
        raise TemplateError(f"value larger than {MAX_VALUE_SIZE} bytes")
    return s


def _go_repr(v: Any, top: bool = False) -> str:
    if v is None:
        return "<no value>" if top else "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{go_repr(k)}:{go_repr(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(go_repr(x) for x in v) + "]"
    return str(v)


def go_float(f: float, verb: str = "g", prec: int = -1) -> str:
    """Format as strconv.FormatFloat(f, 'g', -1, 64), the shortest, as %v prints floats."""
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if math.isnan(f):
        return "NaN"
    if f == 0:
        return "0" if math.copysign(1, f) > 0 else "-0"
    r = repr(f)
    mant, _, exp_s = r.partition("e")
    digits = mant.replace("-", "").replace(".", "").lstrip("0")
    exp = int(exp_s) if exp_s else 0
    if "." in mant:
        ip, _, fp = mant.lstrip("-").partition(".")
        if fp == "0":
            fp = ""
    else:
        ip, fp = mant.lstrip("-"), ""
    # decimal exponent of the first significant digit
    if ip.strip("0"):
        x = len(ip.lstrip("0")) - 1 + exp
    else:
        x = -(len(fp) - len(fp.lstrip("0"))) - 1 + exp
    digits = digits.rstrip("0") or "0"
    sign = "-" if f < 0 else ""
    if x < -4 or x >= 6:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if x >= 0:
        if len(digits) <= x + 1:
            return sign + digits + "0" * (x + 1 - len(digits))
        return sign + digits[: x + 1] + "." + digits[x + 1 :]
    return sign + "0." + "0" * (-x - 1) + digits


def go_type(v: Any) -> str:
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "map[string]interface {}"
    return "[]interface {}"


def truth(v: Any) -> bool:
    """Return Go template truth: false, 0, nil, empty string, slice or map are false."""
    if v is None:
        return False
    if isinstance(v, (bool, int, float)):
        return bool(v)
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v) > 0
    return True


def go_quote(s: str) -> str:
    """Quote as strconv.Quote."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\a\b\f\n\r\t\v":
            out.append(
                {
                    "\a": "\\a",
                    "\b": "\\b",
                    "\f": "\\f",
                    "\n": "\\n",
                    "\r": "\\r",
                    "\t": "\\t",
                    "\v": "\\v",
                }[ch]
            )
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x80:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def strval(v: Any) -> str:
    """Sprig's strval: strings as-is, everything else through %v."""
    return v if isinstance(v, str) else go_repr(v)


def int64(x: int) -> int:
    """Wrap like Go's int64 arithmetic: two's complement overflow."""
    return ((x + (1 << 63)) % _INT64) - (1 << 63)


def to_int(v: Any) -> int:
    """Convert as Sprig's toInt, cast.ToInt, to a Go int64.

    Numbers, bools and base-0 numeric strings convert; anything else is 0.
    """
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return int64(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return -(1 << 63)  # what Go's int64(float) gives on amd64
        return int64(int(v))
    if isinstance(v, str):
        s = v.strip()
        if len(s) > 100:  # no int64 has that many digits (cast.ToInt: parse error -> 0)
            return 0
        try:
            n = int(s, 0)
            return n if -(1 << 63) <= n < (1 << 63) else 0
        except ValueError:
            try:
                return int(float(s)) if s else 0
            except ValueError:
                return 0
    return 0


def to_float(v: Any) -> float:
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return 0.0
    return 0.0
