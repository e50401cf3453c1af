"""The committed hand-built fixtures are exactly what make_fixtures.py generates."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import FIXTURES
from tests.fixtures.specs import SPECS
from tests.fixtures.specs.common import build


def tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            out[rel] = "-> " + os.readlink(p) if os.path.islink(p) else Path(p).read_bytes().hex()
        # Directories are implied by their files: git stores no empty directory.
    return out


def test_generated_fixtures_are_committed(tmp_path: Path) -> None:
    for make in SPECS:
        s = make()
        built = build(s, tmp_path)
        assert tree(built) == tree(FIXTURES / s.name), (
            f"{s.name}: run tests/fixtures/make_fixtures.py"
        )
