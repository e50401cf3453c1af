"""The executor: walks the parse tree over the data, as Go's ``text/template`` does.

- Go's option ``missingkey=error`` applies.
- ``and`` and ``or`` short-circuit.
- ``range`` visits maps in key order.
- Every step, byte of output and value a function builds is counted against the limits
  of limits.py.
- ``expand_map`` is NFD's ``Helper.ExpandMap`` on the output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nfd_gpu.record import Record, record
from nfd_gpu.rules.template.funcs import ARITY, FUNCTIONS
from nfd_gpu.rules.template.limits import (
    MAX_OUTPUT_SIZE,
    MAX_STEPS,
    MAX_VALUE_SIZE,
    MAX_WORK,
    TemplateError,
)
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
from nfd_gpu.rules.template.parse import parse_tree
from nfd_gpu.rules.template.values import go_repr, go_type, truth


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


@record(slots=False)
class Template(Record):
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
    """Parse a template; raise TemplateError with the line of the problem."""
    return Template(source, parse_tree(source, FUNCTIONS))


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
    arity = ARITY.get(name)
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


def expand_map(tmpl: Template, data: Any) -> dict[str, str]:
    """Run NFD's ``Helper.ExpandMap``: the template, then one ``key=value`` per non-empty line.

    Lines are trimmed. A line without ``=`` is an error.
    """
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
