"""SIGTERM and SIGINT end a starting agent at once, also as PID 1 (its container's init,
where the kernel drops a signal that has no handler): the ``nfd-gpu`` entry point
installs the handlers before the heavy imports (nfd_gpu/entry.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.agent_process import agent_env, console_argv
from tests.conftest import fixture_root


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def agent_pid(proc: subprocess.Popen[str], pid1: bool) -> int:
    """The agent's pid as this namespace sees it (``unshare --fork``'s child when PID 1)."""
    if not pid1:
        return proc.pid
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.002)
    raise AssertionError("unshare started no child")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("pid1", [False, True], ids=["process", "pid1"])
def test_signal_ends_a_starting_agent_at_once(
    tmp_path: Path, signum: signal.Signals, pid1: bool
) -> None:
    """The signal arrives as soon as the process handles SIGTERM: long before the start-up
    line; the process exits within 1 s with 128 + the signal's number."""
    wrap: list[str] = []
    if pid1:
        if os.geteuid() != 0 or not shutil.which("unshare"):
            pytest.skip("PID 1 in a new PID namespace needs root and unshare (util-linux)")
        wrap = ["unshare", "--pid", "--fork", "--kill-child"]
    args = ["run", "--root", str(fixture_root("hgx-h100")), "--output", "featurefile",
            "--features-dir", str(tmp_path), "--no-udev", "--interval", "300"]  # fmt: skip
    proc = subprocess.Popen(
        [*wrap, *console_argv(), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=agent_env(),
    )  # fmt: skip
    try:
        pid = agent_pid(proc, pid1)
        t0 = time.monotonic()
        while not catches(pid, signal.SIGTERM):  # Python handles SIGINT from its start
            assert time.monotonic() - t0 < 30, "the agent never handled the signal"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.001)
        sent = time.monotonic()
        os.kill(pid, signum)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"{signum.name} at {sent - t0:.3f} s -> exit {proc.returncode} in {took:.3f} s")
    assert " starting: outputs=" not in err, f"the signal came after the start-up: {err}"
    assert proc.returncode == 128 + signum, err
    assert took < 1.0, f"{signum.name} took {took:.1f} s"
    assert not list(tmp_path.iterdir()), "nothing is written before the loop"
