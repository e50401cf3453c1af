"""Memory of the test process and of the CLI processes tests start, measured one way: the
kernel's counters in /proc (``statm`` for the sizes now, ``VmHWM`` for a child's peak).

Not ``getrusage``: after fork/vfork + exec, Linux folds the parent's memory high-water mark
into the child's ``ru_maxrss``, so a child of a large pytest process would "peak" at the
size of pytest (e.g. after the e2e suite), and ``RUSAGE_CHILDREN`` is the largest child ever.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

# ``python -m nfd_gpu.cli`` that writes its own peak RSS (VmHWM, kB) to $PEAK_FILE at exit.
_PEAK_WRAPPER = """
import os, runpy
try:
    runpy.run_module("nfd_gpu.cli", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f:
        hwm = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["PEAK_FILE"], "w") as f:
        f.write(hwm)
"""


def statm() -> tuple[int, int]:
    """(virtual size, resident set size) of this process, in bytes."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        size, resident = f.read().split()[:2]
    page = os.sysconf("SC_PAGE_SIZE")
    return int(size) * page, int(resident) * page


def run_cli_with_peak(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 30
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``nfd-gpu ARGS`` in its own process (``python -m nfd_gpu.cli``): the finished process
    and its peak resident set size in bytes."""
    with tempfile.TemporaryDirectory(prefix="nfd-gpu-peak-") as tmp:
        peak_file = Path(tmp) / "peak-kb"
        p = subprocess.run(
            [sys.executable, "-c", _PEAK_WRAPPER, *args],
            capture_output=True,
            text=True,
            env={**(os.environ if env is None else env), "PEAK_FILE": str(peak_file)},
            timeout=timeout,
        )
        return p, int(peak_file.read_text()) * 1024
