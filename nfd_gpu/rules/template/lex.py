"""The lexer: template source -> text items and actions, each a tuple of tokens.

Go's ``text/template/parse`` lexes the same way:

- ``{{`` and ``}}`` delimit actions;
- ``{{- `` and `` -}}`` trim the white space beside them;
- ``{{/* */}}`` is a comment.

Line numbers are kept for the error messages.
"""

from __future__ import annotations

import re
from typing import Any

from nfd_gpu.record import Record, record
from nfd_gpu.rules.template.limits import TemplateError

_SPACE = " \t\r\n"
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|"
    r"(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?)"
)


@record()
class Token(Record):
    kind: str  # field var ident string number char ( ) | , := = dot
    value: Any
    line: int
    spaced: bool  # whitespace before the token


@record()
class Text(Record):
    text: str
    line: int


@record()
class Action(Record):
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


def lex(src: str) -> list[Text | Action]:
    """Split template source into text and action items, with the tokens of each action."""
    lx = _Lexer(src)
    pos = 0
    while pos < lx.n or lx.trim_next:
        start = src.find("{{", pos)
        i = lx.text_before(pos, start)
        if i is None:
            break
        lx.line += src.count("\n", pos, start)
        end = lx.comment(start, i)
        pos = end if end is not None else lx.action(start, i)
    return lx.items


class _Lexer:
    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)
        self.items: list[Text | Action] = []
        self.line = 1
        self.trim_next = False  # the last action ended with " -}}"

    def text_before(self, pos: int, start: int) -> int | None:
        """Emit the text up to ``{{`` at ``start``, trimmed as the markers say.

        Return the position after ``{{`` and any ``- ``, or None at the end of the source.
        """
        src = self.src
        text = src[pos:] if start < 0 else src[pos:start]
        if self.trim_next:
            text = text.lstrip(_SPACE)
            self.trim_next = False
        if start < 0:
            if text:
                self.items.append(Text(text, self.line))
            return None
        i = start + 2
        if i + 1 < self.n and src[i] == "-" and src[i + 1] in _SPACE:
            text = text.rstrip(_SPACE)
            i += 2
        if text:
            self.items.append(Text(text, self.line))
        return i

    def comment(self, start: int, i: int) -> int | None:
        """Skip a ``{{/* ... */}}`` comment at ``i``; return the position after it, or None."""
        src, n = self.src, self.n
        j = i
        while j < n and src[j] in _SPACE:
            j += 1
        if not src.startswith("/*", j):
            return None
        end = src.find("*/", j + 2)
        if end < 0:
            raise TemplateError(f"line {self.line}: unclosed comment")
        k = end + 2
        if src.startswith(" -}}", k):
            self.trim_next = True
            k += 4
        elif src.startswith("}}", k):
            k += 2
        else:
            raise TemplateError(f"line {self.line}: comment ends before closing delimiter")
        self.line += src.count("\n", start, k)
        return k

    def action(self, start: int, i: int) -> int:
        """Tokenize the action opened at ``start``; return the position after its ``}}``."""
        src, n, aline = self.src, self.n, self.line
        tokens: list[Token] = []
        spaced = True
        while True:
            if i >= n:
                raise TemplateError(f"line {aline}: unclosed action")
            c = src[i]
            if c in _SPACE:
                if src.startswith("-}}", i + 1):
                    self.trim_next = True
                    i += 4
                    break
                i += 1
                spaced = True
                continue
            if src.startswith("}}", i):
                i += 2
                break
            tline = self.line + src.count("\n", start, i)
            kind, value, i = self.token(c, i, tline)
            tokens.append(Token(kind, value, tline, spaced))
            spaced = False
        self.items.append(Action(tuple(tokens), aline))
        self.line += src.count("\n", start, i)
        return i

    def token(self, c: str, i: int, line: int) -> tuple[str, Any, int]:
        """Return the token starting with ``c`` at ``i``: kind, value, position after it."""
        src, n = self.src, self.n
        if c == '"':
            return self.quoted(i, line)
        if c == "`":
            j = src.find("`", i + 1)
            if j < 0:
                raise TemplateError(f"line {line}: unterminated raw quoted string")
            return "string", src[i + 1 : j], j + 1
        if c == "'":
            return self.char(i, line)
        if c == "$":
            m = _IDENT_RE.match(src, i + 1)
            name = "$" + (m.group(0) if m else "")
            return "var", name, i + len(name)
        if c == ".":
            return self.dot(i, line)
        if c.isdigit() or (c in "+-" and i + 1 < n and (src[i + 1].isdigit() or src[i + 1] == ".")):
            return self.number(i, line)
        if c == ":" and src.startswith(":=", i):
            return ":=", ":=", i + 2
        if c in "()|,=":
            return c, c, i + 1
        if (c.isalpha() or c == "_") and (m := _IDENT_RE.match(src, i)) is not None:
            return "ident", m.group(0), m.end()
        raise TemplateError(f"line {line}: unexpected {c!r} in action")

    def quoted(self, i: int, line: int) -> tuple[str, Any, int]:
        src, n = self.src, self.n
        j = i + 1
        while j < n and src[j] != '"':
            if src[j] == "\n":
                raise TemplateError(f"line {line}: unterminated quoted string")
            j += 2 if src[j] == "\\" else 1
        if j >= n:
            raise TemplateError(f"line {line}: unterminated quoted string")
        return "string", _unquote(src[i + 1 : j], '"', line), j + 1

    def char(self, i: int, line: int) -> tuple[str, Any, int]:
        src, n = self.src, self.n
        j = i + 1
        while j < n and src[j] != "'":
            j += 2 if src[j] == "\\" else 1
        if j >= n:
            raise TemplateError(f"line {line}: unterminated character constant")
        ch = _unquote(src[i + 1 : j], "'", line)
        if len(ch) != 1:
            raise TemplateError(f"line {line}: malformed character constant")
        return "number", ord(ch), j + 1

    def dot(self, i: int, line: int) -> tuple[str, Any, int]:
        """Lex ``.Field``, a number like ``.5``, or dot itself."""
        src = self.src
        m = _IDENT_RE.match(src, i + 1)
        if m:
            return "field", m.group(0), m.end()
        if i + 1 < self.n and src[i + 1].isdigit():
            m2 = _NUMBER_RE.match(src, i)
            assert m2 is not None
            return "number", _parse_number(m2.group(0), line), m2.end()
        return "dot", ".", i + 1

    def number(self, i: int, line: int) -> tuple[str, Any, int]:
        src = self.src
        m = _NUMBER_RE.match(src, i)
        if m is None or not m.group(0).strip("+-"):
            raise TemplateError(f"line {line}: bad number syntax")
        end = m.end()
        if end < self.n and (src[end].isalnum() or src[end] == "_"):
            raise TemplateError(f"line {line}: bad number syntax: {src[i : end + 1]!r}")
        return "number", _parse_number(m.group(0), line), end
