"""Shared test helpers: fixture roots and the golden files."""

from __future__ import annotations

import functools
import gc
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.k8s_api_server import FakeKubeAPI

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "sysfs"
GOLDEN = TESTS / "golden"
REPO = TESTS.parent
DATA = TESTS / "data"  # outside facts, copied verbatim (tests/data/README.md)

ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def fixture_root(name: str) -> Path:
    return FIXTURES / name


def nfd_gpu_cmd() -> list[str]:
    """The CLI as a subprocess (the venv's interpreter running the console entry)."""
    return [sys.executable, "-m", "nfd_gpu.cli"]


@functools.cache
def no_nvml_dir() -> Path:
    """A directory whose ``pynvml.py`` cannot be imported: put first on a subprocess's
    PYTHONPATH, fixture scans never ask a real NVML (``--nvml auto`` asks the library under
    any root), so the suite gives the same results on a machine with an NVIDIA GPU."""
    d = Path(tempfile.mkdtemp(prefix="nfd-gpu-tests-no-pynvml-"))
    (d / "pynvml.py").write_text('raise ImportError("tests: no real NVML")\n')
    return d


@pytest.fixture(autouse=True)
def _no_real_nvml(request: pytest.FixtureRequest) -> Iterator[None]:
    """In-process scans never ask a real NVML either (see :func:`no_nvml_dir`); tests that
    need one put a fake in ``sys.modules`` or on ``sys.path`` themselves."""
    if request.node.get_closest_marker("real_pynvml"):
        yield
        return
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]
    try:
        yield
    finally:
        mp.undo()


@pytest.fixture
def k8s_server() -> Iterator[FakeKubeAPI]:
    """The test API server (tests/k8s_api_server.py) on loopback, stopped after the test."""
    from tests.k8s_api_server import running

    with running() as api:
        yield api


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NFD_GPU_ROOT", None)
    env["PYTHONPATH"] = os.pathsep.join([str(no_nvml_dir()), str(REPO)])
    return env


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every test module, its tables and renderings, the kubernetes
    client, hypothesis) moved out of the cyclic garbage collector's sight (``gc.freeze``).
    The rules loader runs a full ``gc.collect()`` per rule file it parses (rules/yamldocs.py
    ``compacted``: the agent's heap is small); in a test process each one walked the whole
    imported suite again. What the tests themselves make is still collected as before."""
    gc.collect()
    gc.freeze()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Counts reported by the NFD differential tests (tests/e2e/oracle.py)."""
    oracle = sys.modules.get("tests.e2e.oracle")
    for line in getattr(oracle, "SUMMARY", []):
        terminalreporter.write_line(line)
