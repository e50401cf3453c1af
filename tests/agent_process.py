"""``nfd-gpu run`` as a child process that a test stops with SIGTERM and times."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def agent_env(**extra: str) -> dict[str, str]:
    """This environment without the agent's own settings (``NFD_GPU_*``, the downward API's
    ``POD_*``, ``KUBECONFIG``), plus ``extra``; this checkout first on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NFD_GPU_", "POD_", "KUBE"))}
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    return env


@contextlib.contextmanager
def agent_process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``nfd-gpu run ARGS`` with stdout and stderr piped; killed on the way out if it still
    runs (a failed assertion never leaves it behind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nfd_gpu.cli", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def sigterm(proc: subprocess.Popen[str], timeout: float = 10) -> tuple[str, float]:
    """Send SIGTERM and wait for the exit: (its stderr, seconds from the signal to the exit)."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=timeout)
    return err, time.monotonic() - sent


def console_argv() -> list[str]:
    """The ``nfd-gpu`` console script pyproject.toml declares, run as pip's wrapper runs it."""
    m = re.search(
        r'^nfd-gpu = "([\w.]+):(\w+)"$',
        (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(),
        re.M,
    )
    assert m, "pyproject.toml: no nfd-gpu console script"
    mod, fn = m.groups()
    return [sys.executable, "-c", f"import sys; from {mod} import {fn}; sys.exit({fn}())"]
