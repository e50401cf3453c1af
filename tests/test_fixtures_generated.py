"""The committed hand-built fixtures are exactly what make_fixtures.py generates."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from tests.conftest import FIXTURES, TESTS


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
    spec = importlib.util.spec_from_file_location(
        "make_fixtures", TESTS / "fixtures/make_fixtures.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while decorating
    spec.loader.exec_module(mod)
    for make in mod.SPECS:
        s = make()
        built = mod.build(s, tmp_path)
        assert tree(built) == tree(FIXTURES / s.name), (
            f"{s.name}: run tests/fixtures/make_fixtures.py"
        )
