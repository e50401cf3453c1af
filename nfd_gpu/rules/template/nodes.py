"""The parse tree: what the parser builds and the executor walks.

As in Go's ``text/template/parse``, but only the node kinds NFD's templates can use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
