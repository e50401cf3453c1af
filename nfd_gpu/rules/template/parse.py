"""The parser: lexed items -> a tree of nodes, from nodes.py.

It checks what Go's ``text/template/parse`` checks:

- variables are declared before use;
- functions exist;
- ``break`` and ``continue`` sit inside ``range``;
- blocks close;
- nesting stays within MAX_DEPTH.

``define``, ``template``, ``block`` and ``call`` are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nfd_gpu.rules.template.lex import Action, Text, Token, lex
from nfd_gpu.rules.template.limits import MAX_DEPTH, MAX_TEMPLATE_SIZE, TemplateError
from nfd_gpu.rules.template.nodes import (
    ActionNode,
    BranchNode,
    BreakNode,
    ChainNode,
    CommandNode,
    ConstNode,
    ContinueNode,
    DotNode,
    FieldNode,
    IdentifierNode,
    NilNode,
    Node,
    PipeNode,
    TextNode,
    VariableNode,
)


def parse_tree(source: str, funcs: Mapping[str, Callable[..., Any]]) -> tuple[Node, ...]:
    """Parse a template; raise TemplateError with the line of the problem."""
    if len(source.encode()) > MAX_TEMPLATE_SIZE:
        raise TemplateError(f"template is larger than {MAX_TEMPLATE_SIZE} bytes")
    try:
        return _Parser(lex(source), funcs).parse()
    except RecursionError:
        raise TemplateError(f"template nested deeper than {MAX_DEPTH} levels") from None


_UNSUPPORTED = {
    "define": "'define' (named templates) is not supported",
    "template": "'template' (named templates) is not supported",
    "block": "'block' (named templates) is not supported",
}


class _Parser:
    def __init__(self, items: list[Text | Action], funcs: Mapping[str, Callable[..., Any]]):
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

    def parse_list(self) -> tuple[tuple[Node, ...], tuple[str, Action] | None]:
        """Parse until {{end}} or {{else ...}}, returned, or the end of input: None."""
        nodes: list[Node] = []
        while self.pos < len(self.items):
            item = self.items[self.pos]
            self.pos += 1
            if isinstance(item, Text):
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

    def parse_branch(self, kind: str, item: Action, toks: Sequence[Token]) -> BranchNode:
        self.enter(item.line)
        try:
            return self._parse_branch(kind, item, toks)
        finally:
            self.depth -= 1

    def _parse_branch(self, kind: str, item: Action, toks: Sequence[Token]) -> BranchNode:
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
        if t.kind == "field":
            return FieldNode(t.line, (t.value, *self.field_path()))
        if t.kind == "var":
            if t.value not in self.p.vars:
                raise self.err(f"undefined variable {t.value!r}")
            return VariableNode(t.line, t.value, self.field_path())
        node = self.parse_term(t)
        path = self.field_path()
        if path:
            if isinstance(node, (ConstNode, NilNode)):
                raise self.err(f"unexpected . after term {t.value!r}")
            return ChainNode(t.line, node, path)
        return node

    def field_path(self) -> tuple[str, ...]:
        """Return the ``.a.b`` fields right after an operand, with no space between."""
        path: list[str] = []
        while (nt := self.peek()) is not None and nt.kind == "field" and not nt.spaced:
            path.append(nt.value)
            self.i += 1
        return tuple(path)

    def parse_term(self, t: Token) -> Node:
        """Parse an operand other than a field or variable: dot, constant, function, pipe."""
        if t.kind == "dot":
            return DotNode(t.line)
        if t.kind in ("string", "number"):
            return ConstNode(t.line, t.value)
        if t.kind == "ident":
            return self.parse_ident(t)
        if t.kind == "(":
            return self.parse_paren(t.line)
        raise self.err(f"unexpected {t.value!r} in operand")

    def parse_ident(self, t: Token) -> Node:
        if t.value in ("true", "false"):
            return ConstNode(t.line, t.value == "true")
        if t.value == "nil":
            return NilNode(t.line)
        if t.value in ("if", "else", "end", "range", "with", "break", "continue"):
            raise self.err(f"unexpected keyword {t.value!r} in operand")
        if t.value in _UNSUPPORTED or t.value == "call":
            raise self.err(f"function {t.value!r} is not supported")
        if t.value not in self.p.funcs:
            raise self.err(f"function {t.value!r} not defined")
        return IdentifierNode(t.line, t.value)

    def parse_paren(self, line: int) -> PipeNode:
        """Parse a parenthesised pipeline, its ``(`` already taken, with an optional declaration."""
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
        return PipeNode(line, tuple(decl), is_assign, cmds)
