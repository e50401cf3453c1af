"""nfd_gpu/record.py: a record is frozen to the type checker, and a plain dataclass at run time.

Its compiled ``__init__`` and ``replace`` are judged by ``dataclasses``' own on the same fields.

The judge is mypy itself, with the project's configuration, on a module that assigns to a
record's field: the assignment is an error, a changed copy by ``replace`` is not.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from nfd_gpu.model import PcieLink
from nfd_gpu.record import Record, record, replace

REPO = Path(__file__).resolve().parents[1]

MUTATES = """
from nfd_gpu.model import PcieLink
from nfd_gpu.record import replace

link = PcieLink(current_width=8)
wider = replace(link, current_width=16)
link.current_width = 16
wider.max_width = None
replace(link, no_such_field=1)
"""


def test_assigning_a_field_is_a_type_error(tmp_path: Path) -> None:
    module = tmp_path / "mutates.py"
    module.write_text(MUTATES)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--no-incremental", str(module)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert [e.split(":")[1] for e in errors] == ["7", "8", "9"], out.stdout
    assert all("read-only" in e or "frozen" in e.lower() for e in errors[:2]), out.stdout
    assert "no_such_field" in errors[2], out.stdout  # replace is checked as dataclasses'


def test_a_record_is_a_slotted_dataclass_with_the_shared_methods() -> None:
    @record()
    class Point(Record):
        x: int
        y: int = 0

    p = Point(1)
    assert dataclasses.is_dataclass(Point) and not hasattr(p, "__dict__")
    assert dataclasses.replace(p, y=2) == Point(1, 2) and repr(p).endswith("Point(x=1, y=0)")
    assert {"__setattr__", "__delattr__", "__eq__", "__hash__"}.isdisjoint(vars(Point))
    assert hash(p) == hash((1, 0))
    assert dataclasses.fields(PcieLink)[0].name == "current_gen"


@record()
class _Mixed(Record):
    """Every kind of field the compiled __init__ sets: required, default, factory, init=False."""

    a: int
    b: str = "b"
    c: list[int] = dataclasses.field(default_factory=list)
    d: int = dataclasses.field(default=4, init=False)
    e: list[str] = dataclasses.field(default_factory=lambda: ["e"], init=False)


@dataclasses.dataclass(slots=True)
class _Judge:
    """The same fields as :class:`_Mixed`, by ``dataclasses`` itself: the judge."""

    a: int
    b: str = "b"
    c: list[int] = dataclasses.field(default_factory=list)
    d: int = dataclasses.field(default=4, init=False)
    e: list[str] = dataclasses.field(default_factory=lambda: ["e"], init=False)


def _state(obj: object) -> tuple[object, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(_Judge))


def test_the_compiled_init_sets_what_the_dataclass_one_sets() -> None:
    calls: list[tuple[tuple[object, ...], dict[str, object]]] = [
        ((1,), {}),
        ((1, "x"), {}),
        ((1,), {"c": [2]}),
        ((), {"a": 3, "b": "y", "c": [4]}),
    ]
    for args, kwargs in calls:
        got, want = _Mixed(*args, **kwargs), _Judge(*args, **kwargs)  # type: ignore[arg-type]
        assert _state(got) == _state(want), (args, kwargs)
    assert _Mixed(1).c is not _Mixed(1).c and _Mixed(1).e is not _Mixed(1).e  # fresh factories
    for args, kwargs in [((), {}), ((1, "b", [], 5), {}), ((1,), {"d": 5}), ((1,), {"z": 0})]:
        for cls in (_Mixed, _Judge):  # the same refusals as the dataclass's own __init__
            with pytest.raises(TypeError):
                cls(*args, **kwargs)  # type: ignore[arg-type]
    assert "_first_init" not in _Mixed.__init__.__code__.co_name  # the real one, installed
    assert _Mixed.__init__.__qualname__ == "_Mixed.__init__"


def test_replace_is_dataclasses_replace() -> None:
    m = _Mixed(1, "x", [2])
    m.e.append("changed")  # init=False fields are made anew, as dataclasses.replace does
    for changes in [{}, {"a": 5}, {"b": "z", "c": [9]}]:
        got = replace(m, **changes)  # type: ignore[arg-type]
        assert _state(got) == _state(dataclasses.replace(m, **changes))  # type: ignore[arg-type]
        assert type(got) is _Mixed and got is not m
    for fn in (replace, dataclasses.replace):  # the same refusals as dataclasses.replace
        with pytest.raises(ValueError, match="init=False"):
            fn(m, d=1)
        with pytest.raises(TypeError):
            fn(m, no_such_field=1)
    link = PcieLink(current_width=8, max_width=16)
    assert replace(link, current_width=16) == PcieLink(current_width=16, max_width=16)


def test_a_record_without_a_docstring_is_named_by_its_fields() -> None:
    @record()
    class Bare(Record):
        x: int
        y: int = 0

    assert Bare.__doc__ == "Bare(x, y)"  # not dataclasses' signature of the stand-in __init__


def test_a_field_without_default_after_one_with_is_refused_at_the_declaration() -> None:
    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):

        @record()
        class Wrong(Record):
            x: int = 0
            y: int  # type: ignore[misc]
