"""Shared test helpers: fixture roots and the golden files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "sysfs"
GOLDEN = TESTS / "golden"
REPO = TESTS.parent
SHARED = REPO.parent / "shared"

ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def fixture_root(name: str) -> Path:
    return FIXTURES / name


def nfd_gpu_cmd() -> list[str]:
    """The CLI as a subprocess (the venv's interpreter running the console entry)."""
    return [sys.executable, "-m", "nfd_gpu.cli"]


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NFD_GPU_ROOT", None)
    env["PYTHONPATH"] = str(REPO)
    return env


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Counts reported by the NFD differential tests (tests/e2e/oracle.py)."""
    oracle = sys.modules.get("tests.e2e.oracle")
    for line in getattr(oracle, "SUMMARY", []):
        terminalreporter.write_line(line)
