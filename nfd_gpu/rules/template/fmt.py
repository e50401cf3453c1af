"""Go's ``fmt.Sprintf`` and ``fmt.Sprint``, the ``printf`` and ``print`` functions.

They cover the common verbs. Widths and precisions are bounded by MAX_VALUE_SIZE.
"""

from __future__ import annotations

import re
from typing import Any

from nfd_gpu.rules.template.limits import MAX_VALUE_SIZE, TemplateError
from nfd_gpu.rules.template.values import go_float, go_quote, go_repr, go_type

_VERB_RE = re.compile(r"%([-+# 0]*)(\*|[0-9]+)?(?:\.(\*|[0-9]*))?([a-zA-Z%])")


def go_sprintf(fmt: str, *args: Any) -> str:
    """Format as fmt.Sprintf, for the common verbs: %v %s %d %q %t %x %X %o %b %c %f %e %g %%."""
    out: list[str] = []
    ai = 0
    pos = 0
    for m in _VERB_RE.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        flags, width_s, prec_s, verb = m.groups()
        if verb == "%":
            out.append("%")
            continue
        width: int | None = None
        prec: int | None = None
        if width_s == "*":
            if ai < len(args) and isinstance(args[ai], int):
                width = args[ai]
            ai += 1
        elif width_s:
            width = int(width_s)
        if prec_s == "*":
            if ai < len(args) and isinstance(args[ai], int):
                prec = args[ai]
            ai += 1
        elif prec_s is not None:
            prec = int(prec_s) if prec_s else 0
        if ai >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        a = args[ai]
        ai += 1
        out.append(_format_one(a, flags, width, prec, verb))
    out.append(fmt[pos:])
    if ai < len(args):
        extra = ", ".join(f"{go_type(a)}={go_repr(a)}" for a in args[ai:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _pad(s: str, flags: str, width: int | None, numeric: bool = False) -> str:
    if width is not None and width > MAX_VALUE_SIZE:
        raise TemplateError(f"printf: width {width} larger than {MAX_VALUE_SIZE}")
    if width is None or len(s) >= width:
        return s
    if "-" in flags:
        return s + " " * (width - len(s))
    if "0" in flags and numeric:
        sign = s[0] if s[:1] in "+-" else ""
        body = s[len(sign) :]
        return sign + "0" * (width - len(s)) + body
    return " " * (width - len(s)) + s


def _format_one(a: Any, flags: str, width: int | None, prec: int | None, verb: str) -> str:
    for n in (width, prec):
        if n is not None and abs(n) > MAX_VALUE_SIZE:
            raise TemplateError(f"printf: width or precision {n} larger than {MAX_VALUE_SIZE}")
    bad = f"%!{verb}({go_type(a)}={go_repr(a)})"
    if verb == "v":
        s = go_repr(a)
        return _pad(s, flags, width)
    if verb == "s":
        if isinstance(a, (bool, int, float)) or a is None:
            return bad
        s = go_repr(a)
        if prec is not None:
            s = s[:prec]
        return _pad(s, flags, width)
    if verb == "q":
        if isinstance(a, str):
            return _pad(go_quote(a), flags, width)
        if isinstance(a, int) and not isinstance(a, bool):
            return _pad("'" + go_quote(chr(a))[1:-1].replace("'", "\\'") + "'", flags, width)
        return bad
    if verb == "t":
        return _pad(go_repr(a), flags, width) if isinstance(a, bool) else bad
    if verb in "dxXobc":
        if isinstance(a, bool):
            return bad
        if isinstance(a, str) and verb in "xX":
            s = a.encode().hex()
            return _pad(s.upper() if verb == "X" else s, flags, width)
        if not isinstance(a, int):
            return bad
        if verb == "c":
            return _pad(chr(a), flags, width)
        sign = "-" if a < 0 else ("+" if "+" in flags else (" " if " " in flags else ""))
        n = abs(a)
        body = {"d": f"{n:d}", "x": f"{n:x}", "X": f"{n:X}", "o": f"{n:o}", "b": f"{n:b}"}[verb]
        if "#" in flags and verb in "xXo":
            body = {"x": "0x", "X": "0X", "o": "0"}[verb] + body
        if prec is not None:
            body = body.rjust(prec, "0")
        return _pad(sign + body, flags, width, numeric=prec is None)
    if verb in "feEgG":
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            return bad
        if isinstance(a, int):
            return bad
        if verb in "gG" and prec is None:
            s = go_float(a)
            s = s.upper() if verb == "G" else s
        else:
            p = 6 if prec is None else prec
            s = format(a, f"{'+' if '+' in flags else ''}.{p}{'F' if verb == 'F' else verb}")
            if verb in "eE":
                s = re.sub(r"([eE][+-])(\d)$", r"\g<1>0\2", s)
        if "+" in flags and not s.startswith(("-", "+")):
            s = "+" + s
        return _pad(s, flags, width, numeric=True)
    return f"%!{verb}({go_type(a)}={go_repr(a)})"


def go_sprint(*args: Any) -> str:
    """Format as fmt.Sprint: spaces between operands when neither side is a string."""
    out: list[str] = []
    for i, a in enumerate(args):
        if i > 0 and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_repr(a))
    return "".join(out)
