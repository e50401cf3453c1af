"""The frozen records of the model: :func:`record` declares one, :class:`Record` is its base.

- :func:`record` makes a slotted dataclass frozen to the type checker: mypy reports any
  assignment to a field (PEP 681's ``frozen_default``). At run time it is a plain one.
- A ``frozen=True`` dataclass compiles a ``__setattr__`` and a ``__delattr__`` of its own,
  at every import: ~0.35 ms of its ~0.7 ms, for each record at every start.
- Its ``__init__`` also sets every field through ``object.__setattr__``, for each object.
- Fields are set once, by the ``__init__``; ``dataclasses.replace`` makes a changed copy.

Equality, hash and repr of the records, written once instead of compiled per class:

- A frozen dataclass compiles its ``__eq__``, ``__hash__`` and ``__repr__`` at import.
- They are a third of its cost: the model's 13 records import in 7.5 ms, not 11.9.
- A record declared ``eq=False, repr=False`` on :class:`Record` inherits them from here.
- They behave as the dataclass's own: the fields in order, the class name first.
- A record equals only one of its own class, and hashes as the tuple of its fields.
- Only records whose every field compares, hashes and prints may use it.
- tests/test_model.py checks both.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # typing has it from Python 3.11; the type checker reads typeshed's
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorator: decorator


R = TypeVar("R", bound="Record")


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(dataclasses.field,))
def record(*, slots: bool = True) -> Callable[[type[R]], type[R]]:
    """A :class:`Record` subclass as a dataclass, frozen to the type checker (module doc)."""

    def make(cls: type[R]) -> type[R]:
        return dataclasses.dataclass(slots=slots, eq=False, repr=False)(cls)

    return make


class Record:
    """The base of a frozen dataclass declared ``eq=False, repr=False``: its eq, hash, repr."""

    __slots__ = ()

    def _fields(self) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
        cls = type(self)
        got = _FIELDS.get(cls)
        if got is None:
            names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            got = _FIELDS[cls] = (names, operator.attrgetter(*names))
        return got

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            values = self._fields()[1]
            return bool(values(self) == values(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields()[1](self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        names, values = self._fields()
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, values(self), strict=True))
        return f"{type(self).__qualname__}({shown})"


# Record class -> its field names and a getter of their values, made on first use
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
