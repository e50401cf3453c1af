"""A safe interpreter for the Go ``text/template`` subset NFD rules use.

Nothing here calls ``eval``/``exec``: the template is lexed, parsed into a small
tree and walked. Semantics follow Go's ``text/template`` with NFD's options
(``missingkey=error``; Sprig's text functions minus ``env``, ``expandenv`` and
``getHostByName``). Supported: text, comments, trim markers, ``if``/``else
if``/``else``, ``range`` (slices, maps, integers; one or two variables,
``else``, ``break``, ``continue``), ``with``/``else with``/``else``, variable
declaration and assignment, pipelines, parenthesised pipelines, field chains,
the built-in functions and the Sprig functions listed in ``FUNCTIONS``.
``define``, ``template``, ``block`` and ``call`` are rejected with a clear
error. Template source and output are each capped at 64 KiB, and execution at a
fixed number of steps, so a rule can never hang or flood the agent.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.rules.expressions import ExpressionError, compile_go_regexp

log = logging.getLogger(__name__)

MAX_TEMPLATE_SIZE = 64 * 1024
MAX_OUTPUT_SIZE = 64 * 1024
MAX_STEPS = 200_000
# nesting of {{if}}/{{with}}/{{range}} blocks and parenthesised pipelines
MAX_DEPTH = 100
# one value (a string a function returns, a list's length)
MAX_VALUE_SIZE = 64 * 1024
# total size of every string and list the functions of one execution produce
MAX_WORK = 4 * 1024 * 1024
_INT64 = 1 << 64


class TemplateError(ValueError):
    """A template that cannot be parsed or executed."""


# ======================================================================= lexer

_SPACE = " \t\r\n"
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|"
    r"(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?)"
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # field var ident string number char ( ) | , := = dot
    value: Any
    line: int
    spaced: bool  # whitespace before the token


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    line: int


@dataclass(frozen=True, slots=True)
class _Action:
    tokens: tuple[Token, ...]
    line: int


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
}


def _unquote(body: str, quote: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(body):
            raise TemplateError(f"line {line}: unterminated escape in quoted string")
        d = body[i]
        if d in _ESCAPES and (d != "'" or quote == "'") and (d != '"' or quote == '"'):
            out.append(_ESCAPES[d])
            i += 1
        elif d in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[d]
            hexs = body[i + 1 : i + 1 + n]
            if len(hexs) != n or not all(h in "0123456789abcdefABCDEF" for h in hexs):
                raise TemplateError(f"line {line}: invalid escape \\{d}{hexs}")
            out.append(chr(int(hexs, 16)))
            i += 1 + n
        elif d in "01234567":
            octs = body[i : i + 3]
            if len(octs) != 3 or not all(o in "01234567" for o in octs):
                raise TemplateError(f"line {line}: invalid octal escape")
            out.append(chr(int(octs, 8)))
            i += 3
        else:
            raise TemplateError(f"line {line}: unknown escape sequence \\{d}")
    return "".join(out)


def lex(src: str) -> list[_Text | _Action]:
    """Split template source into text and action items (tokens per action)."""
    items: list[_Text | _Action] = []
    pos, line, n = 0, 1, len(src)
    trim_next = False
    while pos < n or trim_next:
        start = src.find("{{", pos)
        text = src[pos:] if start < 0 else src[pos:start]
        if trim_next:
            text = text.lstrip(_SPACE)
            trim_next = False
        if start < 0:
            if text:
                items.append(_Text(text, line))
            break
        i = start + 2
        if i + 1 < n and src[i] == "-" and src[i + 1] in _SPACE:
            text = text.rstrip(_SPACE)
            i += 2
        if text:
            items.append(_Text(text, line))
        line += src.count("\n", pos, start)
        aline = line
        # comment
        j = i
        while j < n and src[j] in _SPACE:
            j += 1
        if src.startswith("/*", j):
            end = src.find("*/", j + 2)
            if end < 0:
                raise TemplateError(f"line {aline}: unclosed comment")
            k = end + 2
            if src.startswith(" -}}", k):
                trim_next = True
                k += 4
            elif src.startswith("}}", k):
                k += 2
            else:
                raise TemplateError(f"line {aline}: comment ends before closing delimiter")
            line += src.count("\n", start, k)
            pos = k
            continue
        tokens: list[Token] = []
        spaced = True
        while True:
            if i >= n:
                raise TemplateError(f"line {aline}: unclosed action")
            c = src[i]
            if c in _SPACE:
                if src.startswith("-}}", i + 1) and c in _SPACE:
                    trim_next = True
                    i += 4
                    break
                i += 1
                spaced = True
                continue
            if src.startswith("}}", i):
                i += 2
                break
            tline = line + src.count("\n", start, i)
            if c == '"':
                j = i + 1
                while j < n and src[j] != '"':
                    if src[j] == "\n":
                        raise TemplateError(f"line {tline}: unterminated quoted string")
                    j += 2 if src[j] == "\\" else 1
                if j >= n:
                    raise TemplateError(f"line {tline}: unterminated quoted string")
                tokens.append(Token("string", _unquote(src[i + 1 : j], '"', tline), tline, spaced))
                i = j + 1
            elif c == "`":
                j = src.find("`", i + 1)
                if j < 0:
                    raise TemplateError(f"line {tline}: unterminated raw quoted string")
                tokens.append(Token("string", src[i + 1 : j], tline, spaced))
                i = j + 1
            elif c == "'":
                j = i + 1
                while j < n and src[j] != "'":
                    j += 2 if src[j] == "\\" else 1
                if j >= n:
                    raise TemplateError(f"line {tline}: unterminated character constant")
                ch = _unquote(src[i + 1 : j], "'", tline)
                if len(ch) != 1:
                    raise TemplateError(f"line {tline}: malformed character constant")
                tokens.append(Token("number", ord(ch), tline, spaced))
                i = j + 1
            elif c == "$":
                m = _IDENT_RE.match(src, i + 1)
                name = "$" + (m.group(0) if m else "")
                tokens.append(Token("var", name, tline, spaced))
                i += len(name)
            elif c == ".":
                m = _IDENT_RE.match(src, i + 1)
                if m:
                    tokens.append(Token("field", m.group(0), tline, spaced))
                    i = m.end()
                elif i + 1 < n and src[i + 1].isdigit():
                    m2 = _NUMBER_RE.match(src, i)
                    assert m2 is not None
                    tokens.append(Token("number", _parse_number(m2.group(0), tline), tline, spaced))
                    i = m2.end()
                else:
                    tokens.append(Token("dot", ".", tline, spaced))
                    i += 1
            elif c.isdigit() or (
                c in "+-" and i + 1 < n and (src[i + 1].isdigit() or src[i + 1] == ".")
            ):
                m2 = _NUMBER_RE.match(src, i)
                if m2 is None or not m2.group(0).strip("+-"):
                    raise TemplateError(f"line {tline}: bad number syntax")
                end = m2.end()
                if end < n and (src[end].isalnum() or src[end] == "_"):
                    raise TemplateError(f"line {tline}: bad number syntax: {src[i : end + 1]!r}")
                tokens.append(Token("number", _parse_number(m2.group(0), tline), tline, spaced))
                i = end
            elif c == ":" and src.startswith(":=", i):
                tokens.append(Token(":=", ":=", tline, spaced))
                i += 2
            elif c in "()|,=":
                tokens.append(Token(c, c, tline, spaced))
                i += 1
            elif c.isalpha() or c == "_":
                m = _IDENT_RE.match(src, i)
                assert m is not None
                tokens.append(Token("ident", m.group(0), tline, spaced))
                i = m.end()
            else:
                raise TemplateError(f"line {tline}: unexpected {c!r} in action")
            spaced = False
        items.append(_Action(tuple(tokens), aline))
        line += src.count("\n", start, i)
        pos = i
    return items


def _parse_number(s: str, line: int) -> int | float:
    t = s.replace("_", "")
    try:
        low = t.lower().lstrip("+-")
        if low.startswith(("0x", "0b", "0o")):
            return int(t, 0)
        if any(ch in low for ch in ".e"):
            return float(t)
        if len(low) > 1 and low.startswith("0"):
            return int(t, 8)
        return int(t)
    except ValueError:
        raise TemplateError(f"line {line}: bad number syntax: {s!r}") from None


# ====================================================================== nodes


@dataclass(frozen=True, slots=True)
class Node:
    line: int


@dataclass(frozen=True, slots=True)
class TextNode(Node):
    text: str


@dataclass(frozen=True, slots=True)
class FieldNode(Node):
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VariableNode(Node):
    name: str
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DotNode(Node):
    pass


@dataclass(frozen=True, slots=True)
class IdentifierNode(Node):
    name: str


@dataclass(frozen=True, slots=True)
class ConstNode(Node):
    value: Any


@dataclass(frozen=True, slots=True)
class NilNode(Node):
    pass


@dataclass(frozen=True, slots=True)
class ChainNode(Node):
    node: Node
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommandNode(Node):
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class PipeNode(Node):
    decl: tuple[str, ...]
    is_assign: bool
    cmds: tuple[CommandNode, ...]


@dataclass(frozen=True, slots=True)
class ActionNode(Node):
    pipe: PipeNode


@dataclass(frozen=True, slots=True)
class BranchNode(Node):
    kind: str  # if with range
    pipe: PipeNode
    body: tuple[Node, ...]
    else_body: tuple[Node, ...] | None


@dataclass(frozen=True, slots=True)
class BreakNode(Node):
    pass


@dataclass(frozen=True, slots=True)
class ContinueNode(Node):
    pass


# ===================================================================== parser

_UNSUPPORTED = {
    "define": "'define' (named templates) is not supported",
    "template": "'template' (named templates) is not supported",
    "block": "'block' (named templates) is not supported",
}


class _Parser:
    def __init__(self, items: list[_Text | _Action], funcs: Mapping[str, Callable[..., Any]]):
        self.items = items
        self.pos = 0
        self.funcs = funcs
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.depth = 0

    def enter(self, line: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TemplateError(f"line {line}: nested deeper than {MAX_DEPTH} levels")

    # -- item level
    def parse(self) -> tuple[Node, ...]:
        body, end = self.parse_list()
        if end is not None:
            raise TemplateError(f"line {end[1].line}: unexpected {{{{{end[0]}}}}}")
        return body

    def parse_list(self) -> tuple[tuple[Node, ...], tuple[str, _Action] | None]:
        """Parse until {{end}} / {{else ...}} (returned) or end of input (None)."""
        nodes: list[Node] = []
        while self.pos < len(self.items):
            item = self.items[self.pos]
            self.pos += 1
            if isinstance(item, _Text):
                nodes.append(TextNode(item.line, item.text))
                continue
            toks = item.tokens
            if not toks:
                raise TemplateError(f"line {item.line}: missing value for command")
            first = toks[0]
            kw = first.value if first.kind == "ident" else None
            if kw in ("end", "else"):
                return tuple(nodes), (kw, item)
            if kw in _UNSUPPORTED:
                raise TemplateError(f"line {item.line}: {_UNSUPPORTED[kw]}")
            if kw in ("if", "with", "range"):
                nodes.append(self.parse_branch(kw, item, toks[1:]))
            elif kw in ("break", "continue"):
                if len(toks) != 1:
                    raise TemplateError(f"line {item.line}: unexpected token in {{{{{kw}}}}}")
                if self.range_depth == 0:
                    raise TemplateError(f"line {item.line}: {{{{{kw}}}}} outside {{{{range}}}}")
                nodes.append(BreakNode(item.line) if kw == "break" else ContinueNode(item.line))
            else:
                pipe = _PipeParser(self, toks, item.line).parse_pipeline("command", allow_decl=True)
                nodes.append(ActionNode(item.line, pipe))
        return tuple(nodes), None

    def parse_branch(self, kind: str, item: _Action, toks: Sequence[Token]) -> BranchNode:
        self.enter(item.line)
        try:
            return self._parse_branch(kind, item, toks)
        finally:
            self.depth -= 1

    def _parse_branch(self, kind: str, item: _Action, toks: Sequence[Token]) -> BranchNode:
        mark = len(self.vars)
        pipe = _PipeParser(self, toks, item.line).parse_pipeline(kind, allow_decl=True)
        if kind == "range":
            self.range_depth += 1
        body, end = self.parse_list()
        if kind == "range":
            self.range_depth -= 1
        if end is None:
            raise TemplateError(f"line {item.line}: unexpected EOF: missing {{{{end}}}} for {kind}")
        else_body: tuple[Node, ...] | None = None
        word, eitem = end
        if word == "else":
            rest = eitem.tokens[1:]
            if rest and rest[0].kind == "ident" and rest[0].value in ("if", "with"):
                # {{else if ...}} is {{else}}{{if ...}}...{{end}}{{end}} sharing one end
                else_body = (self.parse_branch(rest[0].value, eitem, rest[1:]),)
            else:
                if rest:
                    raise TemplateError(f"line {eitem.line}: unexpected token in {{{{else}}}}")
                else_body, end2 = self.parse_list()
                if end2 is None or end2[0] != "end":
                    raise TemplateError(
                        f"line {item.line}: expected {{{{end}}}} after {{{{else}}}} of {kind}"
                    )
                if len(end2[1].tokens) != 1:
                    raise TemplateError(f"line {end2[1].line}: unexpected token in {{{{end}}}}")
        elif len(eitem.tokens) != 1:
            raise TemplateError(f"line {eitem.line}: unexpected token in {{{{end}}}}")
        del self.vars[mark:]
        return BranchNode(item.line, kind, pipe, body, else_body)


class _PipeParser:
    def __init__(self, parser: _Parser, toks: Sequence[Token], line: int):
        self.p = parser
        self.toks = toks
        self.i = 0
        self.line = line

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def err(self, msg: str) -> TemplateError:
        return TemplateError(f"line {self.line}: {msg}")

    def parse_pipeline(self, context: str, allow_decl: bool) -> PipeNode:
        decl: list[str] = []
        is_assign = False
        t0, t1 = self.peek(), self.peek(1)
        if allow_decl and t0 is not None and t0.kind == "var" and t1 is not None:
            if t1.kind in (":=", "="):
                decl = [t0.value]
                is_assign = t1.kind == "="
                self.i += 2
            elif t1.kind == "," and context == "range":
                t2, t3 = self.peek(2), self.peek(3)
                if t2 is None or t2.kind != "var" or t3 is None or t3.kind not in (":=", "="):
                    raise self.err("range can only initialize variables as '$i, $e :='")
                decl = [t0.value, t2.value]
                is_assign = t3.kind == "="
                self.i += 4
        if is_assign:
            for v in decl:
                if v not in self.p.vars:
                    raise self.err(f"undefined variable {v!r}")
        pipe = self.parse_cmds(context)
        if not is_assign:
            self.p.vars.extend(decl)
        if self.i < len(self.toks):
            raise self.err(f"unexpected {self.toks[self.i].value!r} in {context}")
        return PipeNode(self.line, tuple(decl), is_assign, pipe)

    def parse_cmds(self, context: str, stop: str | None = None) -> tuple[CommandNode, ...]:
        cmds: list[CommandNode] = []
        while True:
            args: list[Node] = []
            while True:
                t = self.peek()
                if t is None or t.kind == "|" or (stop is not None and t.kind == stop):
                    break
                if args and not t.spaced and t.kind != "(":
                    raise self.err(f"missing space before {t.value!r}")
                args.append(self.parse_operand())
            if not args:
                raise self.err(f"missing value for {context}")
            cmds.append(CommandNode(self.line, tuple(args)))
            t = self.peek()
            if t is None or t.kind != "|":
                break
            self.i += 1
        for c in cmds[1:]:
            if isinstance(c.args[0], (ConstNode, NilNode, DotNode)):
                raise self.err("non executable command in pipeline stage")
        return tuple(cmds)

    def parse_operand(self) -> Node:
        t = self.peek()
        assert t is not None
        self.i += 1
        node: Node
        line = t.line
        if t.kind == "field":
            path = [t.value]
            while (nt := self.peek()) is not None and nt.kind == "field" and not nt.spaced:
                path.append(nt.value)
                self.i += 1
            return FieldNode(line, tuple(path))
        if t.kind == "var":
            if t.value not in self.p.vars:
                raise self.err(f"undefined variable {t.value!r}")
            path = []
            while (nt := self.peek()) is not None and nt.kind == "field" and not nt.spaced:
                path.append(nt.value)
                self.i += 1
            return VariableNode(line, t.value, tuple(path))
        if t.kind == "dot":
            node = DotNode(line)
        elif t.kind in ("string", "number"):
            node = ConstNode(line, t.value)
        elif t.kind == "ident":
            if t.value in ("true", "false"):
                node = ConstNode(line, t.value == "true")
            elif t.value == "nil":
                node = NilNode(line)
            elif t.value in ("if", "else", "end", "range", "with", "break", "continue"):
                raise self.err(f"unexpected keyword {t.value!r} in operand")
            elif t.value in _UNSUPPORTED or t.value == "call":
                raise self.err(f"function {t.value!r} is not supported")
            elif t.value not in self.p.funcs:
                raise self.err(f"function {t.value!r} not defined")
            else:
                node = IdentifierNode(line, t.value)
        elif t.kind == "(":
            mark = len(self.p.vars)
            decl: list[str] = []
            is_assign = False
            t0, t1 = self.peek(), self.peek(1)
            if t0 is not None and t0.kind == "var" and t1 is not None and t1.kind in (":=", "="):
                decl, is_assign = [t0.value], t1.kind == "="
                self.i += 2
            self.p.enter(line)
            cmds = self.parse_cmds("parenthesized pipeline", stop=")")
            self.p.depth -= 1
            nt = self.peek()
            if nt is None or nt.kind != ")":
                raise self.err("unclosed left paren")
            self.i += 1
            if not is_assign:
                self.p.vars.extend(decl)
            del mark
            node = PipeNode(line, tuple(decl), is_assign, cmds)
        else:
            raise self.err(f"unexpected {t.value!r} in operand")
        path = []
        while (nt := self.peek()) is not None and nt.kind == "field" and not nt.spaced:
            path.append(nt.value)
            self.i += 1
        if path:
            if isinstance(node, (ConstNode, NilNode)):
                raise self.err(f"unexpected . after term {t.value!r}")
            return ChainNode(line, node, tuple(path))
        return node


# ================================================================== go values


def go_repr(v: Any, top: bool = False) -> str:
    """Format a value like Go's ``fmt`` ``%v`` (containers: at most MAX_VALUE_SIZE)."""
    if isinstance(v, (Mapping, list, tuple)):
        budget = [MAX_VALUE_SIZE]
        return _repr_bounded(v, budget)
    return _go_repr(v, top)


def _repr_bounded(v: Any, budget: list[int]) -> str:
    """%v of nested containers; raises TemplateError once the text passes the budget
    (lists that contain themselves many times over would otherwise print exponentially)."""
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
    """strconv.FormatFloat(f, 'g', -1, 64) (shortest), as %v prints floats."""
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
    """Go template truth: false, 0, nil, empty string/slice/map are false."""
    if v is None:
        return False
    if isinstance(v, (bool, int, float)):
        return bool(v)
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v) > 0
    return True


def go_quote(s: str) -> str:
    """strconv.Quote."""
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


_VERB_RE = re.compile(r"%([-+# 0]*)(\*|[0-9]+)?(?:\.(\*|[0-9]*))?([a-zA-Z%])")


def go_sprintf(fmt: str, *args: Any) -> str:
    """fmt.Sprintf for the common verbs (%v %s %d %q %t %x %X %o %b %c %f %e %g %%)."""
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
    """fmt.Sprint: spaces between operands when neither side is a string."""
    out: list[str] = []
    for i, a in enumerate(args):
        if i > 0 and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_repr(a))
    return "".join(out)


# ================================================================== functions


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "nil"
    return "other"


def _cmp_check(a: Any, b: Any) -> None:
    ka, kb = _kind(a), _kind(b)
    if ka in ("nil", "other") or kb in ("nil", "other"):
        raise TemplateError(f"invalid type for comparison: {go_type(a)} and {go_type(b)}")
    if ka != kb:
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


def strval(v: Any) -> str:
    """Sprig's strval: strings as-is, everything else through %v."""
    return v if isinstance(v, str) else go_repr(v)


def int64(x: int) -> int:
    """Wrap like Go's int64 arithmetic (two's complement overflow)."""
    return ((x + (1 << 63)) % _INT64) - (1 << 63)


def to_int(v: Any) -> int:
    """Sprig's toInt (cast.ToInt): numbers, bools and base-0 numeric strings, else 0;
    a Go int64."""
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


def _atoi(s: Any) -> int:
    try:
        from nfd_gpu.rules.expressions import go_atoi

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
    """Refuse a substitution whose result could pass MAX_VALUE_SIZE (before building it)."""
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
    """(min, max) positional arguments ``sig.bind(*args)`` accepts."""
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


_ARITY: dict[str, tuple[int, float]] = {}
for _name, _fn in FUNCTIONS.items():
    with contextlib.suppress(TypeError, ValueError):  # builtins without a signature
        _ARITY[_name] = _arity(inspect.signature(_fn))


# =================================================================== executor


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


_NOARG = object()


@dataclass
class _State:
    out: list[str] = field(default_factory=list)
    size: int = 0
    steps: int = 0
    work: int = 0  # bytes and list items produced by functions (MAX_WORK)
    vars: list[tuple[str, Any]] = field(default_factory=list)

    def write(self, s: str) -> None:
        self.size += len(s.encode())
        if self.size > MAX_OUTPUT_SIZE:
            raise TemplateError(f"template output exceeds {MAX_OUTPUT_SIZE} bytes")
        self.out.append(s)

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateError(f"template execution exceeds {MAX_STEPS} steps")

    def lookup(self, name: str, line: int) -> Any:
        for n, v in reversed(self.vars):
            if n == name:
                return v
        raise TemplateError(f"line {line}: undefined variable {name!r}")

    def assign(self, name: str, value: Any, line: int) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise TemplateError(f"line {line}: undefined variable {name!r}")


@dataclass(frozen=True)
class Template:
    """A parsed template; ``execute(data)`` returns the output text."""

    source: str
    root: tuple[Node, ...]

    def execute(self, data: Any) -> str:
        st = _State(vars=[("$", data)])
        try:
            _walk_list(st, self.root, data)
        except RecursionError:
            raise TemplateError("template execution nested too deeply") from None
        return "".join(st.out)


def parse(source: str) -> Template:
    """Parse a template; raises TemplateError with the line of the problem."""
    if len(source.encode()) > MAX_TEMPLATE_SIZE:
        raise TemplateError(f"template is larger than {MAX_TEMPLATE_SIZE} bytes")
    try:
        return Template(source, _Parser(lex(source), FUNCTIONS).parse())
    except RecursionError:
        raise TemplateError(f"template nested deeper than {MAX_DEPTH} levels") from None


def _walk_list(st: _State, nodes: Sequence[Node], dot: Any) -> None:
    for n in nodes:
        _walk(st, n, dot)


def _walk(st: _State, node: Node, dot: Any) -> None:
    st.step()
    if isinstance(node, TextNode):
        st.write(node.text)
    elif isinstance(node, ActionNode):
        v = _eval_pipe(st, dot, node.pipe)
        if not node.pipe.decl:
            st.write(go_repr(v, top=True))
    elif isinstance(node, BranchNode):
        mark = len(st.vars)
        try:
            if node.kind == "range":
                _walk_range(st, node, dot)
            else:
                v = _eval_pipe(st, dot, node.pipe, declare=node.kind != "range")
                if truth(v):
                    _walk_list(st, node.body, v if node.kind == "with" else dot)
                elif node.else_body is not None:
                    _walk_list(st, node.else_body, dot)
        finally:
            del st.vars[mark:]
    elif isinstance(node, BreakNode):
        raise _Break
    elif isinstance(node, ContinueNode):
        raise _Continue
    else:  # pragma: no cover - parser produces only the nodes above
        raise TemplateError(f"line {node.line}: unknown node")


def _walk_range(st: _State, node: BranchNode, dot: Any) -> None:
    pipe = node.pipe
    v = _eval_pipe(st, dot, PipeNode(pipe.line, (), False, pipe.cmds))
    items: Iterator[tuple[Any, Any]]
    if isinstance(v, Mapping):
        items = ((k, v[k]) for k in sorted(v))
        empty = not v
    elif isinstance(v, (list, tuple)):
        items = iter(enumerate(v))
        empty = not v
    elif isinstance(v, int) and not isinstance(v, bool):
        if len(pipe.decl) > 1:
            raise TemplateError(
                f"line {node.line}: can't use {v} to iterate over more than one variable"
            )
        items = ((i, i) for i in range(max(v, 0)))
        empty = v <= 0
    elif v is None:
        items, empty = iter(()), True
    else:
        raise TemplateError(f"line {node.line}: range can't iterate over {go_repr(v)}")
    if empty:
        if node.else_body is not None:
            _walk_list(st, node.else_body, dot)
        return
    mark = len(st.vars)
    for k, elem in items:
        st.step()
        del st.vars[mark:]
        if len(pipe.decl) == 1:
            _set_var(st, pipe, pipe.decl[0], elem)
        elif len(pipe.decl) == 2:
            _set_var(st, pipe, pipe.decl[0], k)
            _set_var(st, pipe, pipe.decl[1], elem)
        try:
            _walk_list(st, node.body, elem)
        except _Break:
            break
        except _Continue:
            continue


def _set_var(st: _State, pipe: PipeNode, name: str, value: Any) -> None:
    if pipe.is_assign:
        st.assign(name, value, pipe.line)
    else:
        st.vars.append((name, value))


def _eval_pipe(st: _State, dot: Any, pipe: PipeNode, declare: bool = True) -> Any:
    v: Any = _NOARG
    for cmd in pipe.cmds:
        v = _eval_cmd(st, dot, cmd, v)
    if declare:
        for name in pipe.decl:
            _set_var(st, pipe, name, v)
    return v


def _field(st: _State, line: int, v: Any, path: Sequence[str], ctx: str) -> Any:
    for name in path:
        if isinstance(v, Mapping):
            if name not in v:
                raise TemplateError(f"line {line}: at <{ctx}>: map has no entry for key {name!r}")
            v = v[name]
        elif v is None:
            raise TemplateError(f"line {line}: at <{ctx}>: nil pointer evaluating .{name}")
        else:
            raise TemplateError(
                f"line {line}: at <{ctx}>: can't evaluate field {name} in type {go_type(v)}"
            )
    return v


def _no_args(node: Node, args: Sequence[Node], final: Any) -> None:
    if len(args) > 1 or final is not _NOARG:
        raise TemplateError(f"line {node.line}: can't give argument to non-function")


def _eval_cmd(st: _State, dot: Any, cmd: CommandNode, final: Any) -> Any:
    first = cmd.args[0]
    st.step()
    if isinstance(first, IdentifierNode):
        return _call(st, dot, first, cmd.args[1:], final)
    _no_args(first, cmd.args, final)
    return _eval_arg(st, dot, first)


def _eval_arg(st: _State, dot: Any, n: Node) -> Any:
    if isinstance(n, FieldNode):
        return _field(st, n.line, dot, n.path, "." + ".".join(n.path))
    if isinstance(n, VariableNode):
        return _field(
            st, n.line, st.lookup(n.name, n.line), n.path, n.name + "".join("." + p for p in n.path)
        )
    if isinstance(n, DotNode):
        return dot
    if isinstance(n, ConstNode):
        return n.value
    if isinstance(n, NilNode):
        raise TemplateError(f"line {n.line}: nil is not a command")
    if isinstance(n, PipeNode):
        mark = len(st.vars)
        v = _eval_pipe(st, dot, n)
        if not n.decl or n.is_assign:
            del st.vars[mark:]
        return v
    if isinstance(n, ChainNode):
        return _field(st, n.line, _eval_arg(st, dot, n.node), n.path, "(...)." + ".".join(n.path))
    if isinstance(n, IdentifierNode):
        return _call(st, dot, n, (), _NOARG)
    raise TemplateError(f"line {n.line}: can't evaluate operand")  # pragma: no cover


def _call(st: _State, dot: Any, ident: IdentifierNode, argn: Sequence[Node], final: Any) -> Any:
    name = ident.name
    if name in ("and", "or"):
        nodes = list(argn)
        total = len(nodes) + (final is not _NOARG)
        if total < 1:
            raise TemplateError(
                f"line {ident.line}: wrong number of args for {name}: want at least 1 got 0"
            )
        v: Any = None
        for i, a in enumerate(nodes):
            v = _eval_arg(st, dot, a)
            last = i == total - 1
            if not last and (truth(v) if name == "or" else not truth(v)):
                return v
        if final is not _NOARG:
            v = final
        return v
    args = [_eval_arg(st, dot, a) for a in argn]
    if final is not _NOARG:
        args.append(final)
    fn = FUNCTIONS[name]
    arity = _ARITY.get(name)
    if arity is not None and not arity[0] <= len(args) <= arity[1]:
        raise TemplateError(f"line {ident.line}: wrong number of args for {name}: got {len(args)}")
    # every argument is a bounded value; only the sum of many can be large
    if sum(len(a) for a in args if isinstance(a, (str, list))) > 16 * MAX_VALUE_SIZE:
        raise TemplateError(f"line {ident.line}: error calling {name}: arguments too large")
    try:
        out = fn(*args)
    except TemplateError as e:
        raise TemplateError(f"line {ident.line}: error calling {name}: {e}") from None
    except (ValueError, OverflowError, TypeError, KeyError) as e:
        raise TemplateError(f"line {ident.line}: error calling {name}: {e}") from None
    except RecursionError:
        raise TemplateError(f"line {ident.line}: error calling {name}: nested too deeply") from None
    if isinstance(out, (str, list, dict)):
        size = len(out)
        if size > MAX_VALUE_SIZE:
            raise TemplateError(
                f"line {ident.line}: error calling {name}: result larger than {MAX_VALUE_SIZE}"
            )
        st.work += size
        if st.work > MAX_WORK:
            raise TemplateError(f"template execution produces more than {MAX_WORK} bytes")
    return out


# ================================================================ ExpandMap


def expand_map(tmpl: Template, data: Any) -> dict[str, str]:
    """NFD ``Helper.ExpandMap``: run the template, one ``key=value`` per
    non-empty (trimmed) line; a line without ``=`` is an error."""
    out: dict[str, str] = {}
    for raw in tmpl.execute(data).split("\n"):
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise TemplateError(
                f"invalid expanded template line: {line!r}, format must be '<key>=<value>'"
            )
        out[key] = value
    return out
