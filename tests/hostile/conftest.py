"""Fixtures for the hostile-input suite (tests/hostile): damaged trees, abusive rules,
misbehaving API servers. Every case must end in < 5 s and < 200 MB (``bounded``)."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator

import pytest

from tests.memory import statm

CASE_SECONDS = 5.0
CASE_BYTES = 200 * 1024 * 1024


@pytest.fixture
def bounded() -> Iterator[None]:
    """Fail a case that takes >= 5 s or grows the process by >= 200 MB. The address
    space is also capped for the case, so a runaway allocation fails fast instead of
    taking the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    vsize, base = statm()
    cap = vsize + 4 * CASE_BYTES  # headroom for thread stacks and mmap'd libraries
    if hard == resource.RLIM_INFINITY or cap < hard:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    t0 = time.monotonic()
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    took = time.monotonic() - t0
    grew = statm()[1] - base
    assert took < CASE_SECONDS, f"case took {took:.1f} s (limit {CASE_SECONDS:g} s)"
    assert grew < CASE_BYTES, f"case grew the process by {grew >> 20} MB"


@pytest.fixture(params=["openat2", "portable"])
def resolver(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both confinement paths of HostRoot: the kernel's RESOLVE_IN_ROOT and the portable
    resolver (test_hostile_host.py, test_hostile_devices.py)."""
    from nfd_gpu import host as hostroot

    saved = hostroot._OPENAT2.usable
    if request.param == "openat2" and not saved:
        pytest.skip("openat2 is not available on this kernel")
    hostroot._OPENAT2.usable = request.param == "openat2"
    yield request.param
    hostroot._OPENAT2.usable = saved
