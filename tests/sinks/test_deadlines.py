"""nfd_gpu/sinks/deadlines.py: the requests' deadlines on one thread."""

from __future__ import annotations

import threading
import time

import pytest

from nfd_gpu.sinks.deadlines import Deadlines


def test_a_deadline_runs_when_its_time_passes_and_a_disarmed_one_never() -> None:
    d = Deadlines()
    ran: list[str] = []
    done = threading.Event()
    d.arm(0.05, lambda: ran.append("late"))
    early = d.arm(0.01, lambda: ran.append("disarmed"))
    d.arm(0.02, lambda: ran.append("first"))
    d.arm(0.08, done.set)
    early.disarm()
    t0 = time.monotonic()
    assert done.wait(5)
    assert time.monotonic() - t0 >= 0.07
    assert ran == ["first", "late"]
    assert d.pending() == 0


def test_an_earlier_deadline_wakes_the_thread_from_a_later_one() -> None:
    d = Deadlines()
    done = threading.Event()
    d.arm(60, lambda: None)  # the thread now sleeps for a minute
    t0 = time.monotonic()
    d.arm(0.02, done.set)
    assert done.wait(5) and time.monotonic() - t0 < 30
    assert d.pending() == 1  # the minute's, still armed


def test_one_thread_serves_every_request_and_a_failing_callback_does_not_end_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = Deadlines()
    before = threading.active_count()
    entries = [d.arm(30, lambda: None) for _ in range(50)]
    assert threading.active_count() == before + 1
    for e in entries:
        e.disarm()
    done = threading.Event()
    d.arm(0.01, lambda: 1 / 0)
    d.arm(0.03, done.set)
    assert done.wait(5)
    assert "callback failed" in caplog.text


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_ended_is_started_again() -> None:
    """A callback raising past ``Exception`` (SystemExit) ends the thread; the next deadline
    armed starts another, so no later request goes without its deadline."""
    d = Deadlines()

    def leave() -> None:
        raise SystemExit

    d.arm(0.01, leave)
    deadline = time.monotonic() + 5
    while d._thread is not None and d._thread.is_alive():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    done = threading.Event()
    d.arm(0.01, done.set)
    assert done.wait(5)
