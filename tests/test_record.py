"""nfd_gpu/record.py: a record is frozen to the type checker, and a plain dataclass at run time.

The judge is mypy itself, with the project's configuration, on a module that assigns to a
record's field: the assignment is an error, a changed copy by ``dataclasses.replace`` is not.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from nfd_gpu.model import PcieLink
from nfd_gpu.record import Record, record

REPO = Path(__file__).resolve().parents[1]

MUTATES = """
import dataclasses
from nfd_gpu.model import PcieLink

link = PcieLink(current_width=8)
wider = dataclasses.replace(link, current_width=16)
link.current_width = 16
wider.max_width = None
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
    assert [e.split(":")[1] for e in errors] == ["7", "8"], out.stdout
    assert all("read-only" in e or "frozen" in e.lower() for e in errors), out.stdout


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
