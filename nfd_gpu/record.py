"""The frozen records of the model: :func:`record` declares one, :class:`Record` is its base.

- :func:`record` makes a slotted dataclass frozen to the type checker: mypy reports any
  assignment to a field (PEP 681's ``frozen_default``). At run time it is a plain one.
- A ``frozen=True`` dataclass compiles a ``__setattr__`` and a ``__delattr__`` of its own,
  at every import: ~0.35 ms of its ~0.7 ms, for each record at every start.
- Its ``__init__`` also sets every field through ``object.__setattr__``, for each object.
- Fields are set once, by the ``__init__``; :func:`replace` makes a changed copy.

Each record's ``__init__`` is compiled here, on its first call, not by ``dataclasses``:

- ``dataclasses`` compiles one at import, for each record, used or not: ~0.45 ms of a
  15-field record's ~0.6 ms, most of a record's import (benchmarks/cli.py).
- The one compiled here sets the same fields from the same defaults and factories, in the
  same order, with the same parameters; ``init=False`` fields get their default or factory.
- Until a record's first object, its ``__init__`` is a stand-in taking any arguments.
- The record is still a dataclass: ``dataclasses.fields``, ``replace`` and ``asdict`` work.

:func:`replace` is ``dataclasses.replace`` without its per-call field loop: it reads the
fields the ``__init__`` takes in one ``operator.attrgetter``. A GPU's record (30 fields) is
replaced by each of ~10 discovery steps at every scan: ~7 us a copy by ``dataclasses``,
~5.5 us here; the ``__init__`` is most of both.

Equality, hash and repr of the records, written once instead of compiled per class:

- A frozen dataclass compiles its ``__eq__``, ``__hash__`` and ``__repr__`` at import.
- They are a third of its cost: the model's 13 records import in 7.5 ms, not 11.9.
- A record declared ``eq=False, repr=False`` on :class:`Record` inherits them from here.
- They behave as the dataclass's own: the fields in order, the class name first.
- A record equals only one of its own class, and hashes as the tuple of its fields.
- Only records whose every field compares, hashes and prints may use it.
- tests/test_model.py and tests/test_record.py check both.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # typing has it from Python 3.11; the type checker reads typeshed's
    from _typeshed import DataclassInstance
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorator: decorator


R = TypeVar("R", bound="Record")
D = TypeVar("D", bound="DataclassInstance")
_MISSING = dataclasses.MISSING


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(dataclasses.field,))
def record(*, slots: bool = True) -> Callable[[type[R]], type[R]]:
    """A :class:`Record` subclass as a dataclass, frozen to the type checker (module doc)."""

    def make(cls: type[R]) -> type[R]:
        if cls.__doc__ is None:  # else dataclasses writes one by inspect.signature, ~1 ms
            names = dict.fromkeys(n for c in reversed(cls.__mro__) for n in _annotations(c))
            cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
        made = dataclasses.dataclass(slots=slots, eq=False, repr=False, init=False)(cls)
        _check_order(made)
        made.__init__ = _first_init(made)  # type: ignore[method-assign]
        return made

    return make


def _annotations(cls: type) -> Any:
    return vars(cls).get("__annotations__", ())


def _check_order(cls: type) -> None:
    """Refuse at import, as ``dataclasses`` does, a field without default after one with."""
    defaulted = None
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not _MISSING or f.default_factory is not _MISSING:
            defaulted = defaulted or f.name
        elif defaulted:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _first_init(cls: type) -> Callable[..., None]:
    """``cls``'s stand-in ``__init__``: compiles the real one, installs it and runs it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _compiled_init(cls)
        cls.__init__ = init  # type: ignore[misc]
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _compiled_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` ``dataclasses`` would compile for ``cls``'s fields (module doc)."""
    env: dict[str, Any] = {"__nothing__": _MISSING}
    params: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        n, dflt = f.name, f"__dflt_{f.name}__"
        if f.default_factory is not _MISSING:
            env[dflt] = f.default_factory
            if f.init:
                params.append(f"{n}=__nothing__")
                body.append(f"__self__.{n} = {dflt}() if {n} is __nothing__ else {n}")
            else:
                body.append(f"__self__.{n} = {dflt}()")
        elif f.default is not _MISSING:
            env[dflt] = f.default
            if f.init:
                params.append(f"{n}={dflt}")
            body.append(f"__self__.{n} = {n if f.init else dflt}")
        elif f.init:
            params.append(n)
            body.append(f"__self__.{n} = {n}")
    lines = "".join(f"\n    {line}" for line in body) or "\n    pass"
    source = f"def __init__(__self__, {', '.join(params)}) -> None:{lines}"
    exec(source, env)
    init: Callable[..., None] = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _replace(obj: D, /, **changes: Any) -> D:
    """A copy of dataclass ``obj`` with ``changes``, as ``dataclasses.replace`` (module doc)."""
    cls = obj.__class__
    got = _INIT_FIELDS.get(cls)
    if got is None:
        names = dict.fromkeys(f.name for f in dataclasses.fields(obj) if f.init)
        got = _INIT_FIELDS[cls] = (names, operator.attrgetter(*names) if names else None)
    names, values = got
    if not changes.keys() <= names.keys():  # as dataclasses.replace refuses them
        for f in dataclasses.fields(obj):
            if not f.init and f.name in changes:
                raise ValueError(
                    f"field {f.name} is declared with init=False, it cannot be specified with "
                    "replace()"
                )
    if values is None:
        kwargs: dict[str, Any] = {}
    elif len(names) == 1:
        kwargs = {next(iter(names)): values(obj)}
    else:
        kwargs = dict(zip(names, values(obj), strict=True))
    kwargs.update(changes)
    return cls(**kwargs)


# dataclass -> the names of the fields its __init__ takes and a getter of their values
_INIT_FIELDS: dict[type, tuple[dict[str, None], Callable[[Any], Any] | None]] = {}

if TYPE_CHECKING:  # the type checker checks the changes' names and types as for dataclasses'
    from dataclasses import replace as replace
else:
    replace = _replace


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
