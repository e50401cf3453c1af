"""The parse tree: what the parser builds and the executor walks.

As in Go's ``text/template/parse``, but only the node kinds NFD's templates can use.

- Each node is immutable: it has slots, set once by its ``__init__``.
- They are plain classes, not dataclasses: the agent imports them at start, as the shipped
  rules use templates.
- A frozen dataclass compiles five methods as its class is made: ~0.55 ms a class.
- Two nodes are equal when they are of one kind with equal slots, as dataclasses: a rule
  file reloaded compares its rules, templates included, with the last version's.
"""

from __future__ import annotations

from typing import Any, NoReturn

_set = object.__setattr__


class Node:
    __slots__ = ("line",)
    line: int

    def __init__(self, line: int) -> None:
        _set(self, "line", line)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def _names(self) -> list[str]:
        return [n for c in reversed(type(self).__mro__) for n in getattr(c, "__slots__", ())]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._names())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names())
        return f"{type(self).__name__}({shown})"


class TextNode(Node):
    __slots__ = ("text",)
    text: str

    def __init__(self, line: int, text: str) -> None:
        _set(self, "line", line)
        _set(self, "text", text)


class FieldNode(Node):
    __slots__ = ("path",)
    path: tuple[str, ...]

    def __init__(self, line: int, path: tuple[str, ...]) -> None:
        _set(self, "line", line)
        _set(self, "path", path)


class VariableNode(Node):
    __slots__ = ("name", "path")
    name: str
    path: tuple[str, ...]

    def __init__(self, line: int, name: str, path: tuple[str, ...]) -> None:
        _set(self, "line", line)
        _set(self, "name", name)
        _set(self, "path", path)


class DotNode(Node):
    __slots__ = ()


class IdentifierNode(Node):
    __slots__ = ("name",)
    name: str

    def __init__(self, line: int, name: str) -> None:
        _set(self, "line", line)
        _set(self, "name", name)


class ConstNode(Node):
    __slots__ = ("value",)
    value: Any

    def __init__(self, line: int, value: Any) -> None:
        _set(self, "line", line)
        _set(self, "value", value)


class NilNode(Node):
    __slots__ = ()


class ChainNode(Node):
    __slots__ = ("node", "path")
    node: Node
    path: tuple[str, ...]

    def __init__(self, line: int, node: Node, path: tuple[str, ...]) -> None:
        _set(self, "line", line)
        _set(self, "node", node)
        _set(self, "path", path)


class CommandNode(Node):
    __slots__ = ("args",)
    args: tuple[Node, ...]

    def __init__(self, line: int, args: tuple[Node, ...]) -> None:
        _set(self, "line", line)
        _set(self, "args", args)


class PipeNode(Node):
    __slots__ = ("cmds", "decl", "is_assign")
    decl: tuple[str, ...]
    is_assign: bool
    cmds: tuple[CommandNode, ...]

    def __init__(
        self, line: int, decl: tuple[str, ...], is_assign: bool, cmds: tuple[CommandNode, ...]
    ) -> None:
        _set(self, "line", line)
        _set(self, "decl", decl)
        _set(self, "is_assign", is_assign)
        _set(self, "cmds", cmds)


class ActionNode(Node):
    __slots__ = ("pipe",)
    pipe: PipeNode

    def __init__(self, line: int, pipe: PipeNode) -> None:
        _set(self, "line", line)
        _set(self, "pipe", pipe)


class BranchNode(Node):
    __slots__ = ("body", "else_body", "kind", "pipe")
    kind: str  # if with range
    pipe: PipeNode
    body: tuple[Node, ...]
    else_body: tuple[Node, ...] | None

    def __init__(
        self,
        line: int,
        kind: str,
        pipe: PipeNode,
        body: tuple[Node, ...],
        else_body: tuple[Node, ...] | None,
    ) -> None:
        _set(self, "line", line)
        _set(self, "kind", kind)
        _set(self, "pipe", pipe)
        _set(self, "body", body)
        _set(self, "else_body", else_body)


class BreakNode(Node):
    __slots__ = ()


class ContinueNode(Node):
    __slots__ = ()
