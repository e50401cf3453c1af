"""Interleaved rounds: the one way the benchmarks here time contenders side by side.

Every round runs every contender once, in an order rotated by one each round, so a burst
of load from another job hits all contenders alike instead of one contender's block of
runs. Each run reports its own CPU time (user + system of this process for in-process
work, of the child for a process: ``os.wait4``'s resource usage), wall time, and wall time
less the time it spent runnable but waiting for a CPU (the kernel's run-queue delay,
``/proc/<pid>/schedstat``, read from the exited child before it is reaped; of the main
thread): on a loaded machine, what the wall time would be with a CPU free. The
results are per-contender medians with the p10-p90 spread, and per-round ratios to a
reference contender (median and p10-p90 of the ratios: each ratio compares runs made
seconds apart under the same load).

The header says how the numbers were obtained: load average before and after, CPU count,
Python, and whether nfd-gpu is an editable install (an editable install's import hook
adds start-up time to every CLI process).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata

Sample = tuple[float, float, float]  # (CPU seconds, wall seconds, wall less run-queue wait)


def queued(task: str) -> float:
    """Seconds the task (``self``, ``thread-self`` or a pid) spent waiting on a run queue,
    from Linux's schedstat; 0 where the kernel does not keep it."""
    try:
        with open(f"/proc/{task}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def in_process(fn: Callable[[], object]) -> Callable[[], Sample]:
    """A contender that calls ``fn`` in this process."""

    def run() -> Sample:
        q0, c0, w0 = queued("thread-self"), time.process_time(), time.perf_counter()
        fn()
        wall = time.perf_counter() - w0
        return time.process_time() - c0, wall, wall - (queued("thread-self") - q0)

    return run


def child_process(cmd: Sequence[str], **popen: object) -> Callable[[], Sample]:
    """A contender that runs ``cmd`` to completion (output discarded unless redirected in
    ``popen``); its CPU time is the child's own (``wait4``), failure raises."""

    def run() -> Sample:
        kw: dict[str, object] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        kw.update(popen)
        w0 = time.perf_counter()
        p = subprocess.Popen(list(cmd), **kw)  # type: ignore[call-overload]
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        waited = queued(str(p.pid))
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - w0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} exited {p.returncode}")
        return usage.ru_utime + usage.ru_stime, wall, wall - waited

    return run


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Results:
    names: list[str]
    rounds: int
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def cpu(self, name: str) -> list[float]:
        return [s[0] for s in self.samples[name]]

    def wall(self, name: str) -> list[float]:
        return [s[1] for s in self.samples[name]]

    def ready(self, name: str) -> list[float]:
        """Wall time less run-queue wait."""
        return [s[2] for s in self.samples[name]]

    def ratios(self, name: str, ref: str, wall: bool = False) -> list[float]:
        """Per-round ratios ``name / ref`` (CPU, or wall)."""
        i = 1 if wall else 0
        return [
            a[i] / b[i] for a, b in zip(self.samples[name], self.samples[ref], strict=True) if b[i]
        ]


def interleave(
    contenders: dict[str, Callable[[], Sample]], rounds: int, warmup: int = 1
) -> Results:
    """Run ``rounds`` rounds (after ``warmup`` untimed ones) of every contender, the order
    rotated by one per round."""
    names = list(contenders)
    res = Results(names, rounds, {n: [] for n in names})
    for _ in range(warmup):
        for n in names:
            contenders[n]()
    res.load_before = os.getloadavg()
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            res.samples[n].append(contenders[n]())
    res.load_after = os.getloadavg()
    return res


def install_kind(dist: str = "nfd-gpu") -> str:
    """``editable`` / ``regular`` (from the distribution's PEP 610 ``direct_url.json``) /
    ``not installed``, with where the package is imported from."""
    try:
        d = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return "not installed (imported from the source tree)"
    text = d.read_text("direct_url.json")
    editable = bool(text and json.loads(text).get("dir_info", {}).get("editable"))
    return "editable" if editable else "regular"


def install_kind_of(executable: str) -> str:
    """:func:`install_kind` as seen by the interpreter of a console script (its ``#!`` line)."""
    with open(executable, "rb") as f:
        first = f.readline().decode(errors="replace")
    if not first.startswith("#!"):
        return "unknown"
    return install_kind_of_python(first[2:].strip().split()[0])


def install_kind_of_python(python: str) -> str:
    """:func:`install_kind` as seen by the interpreter ``python``."""
    code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
    code += "import rounds; print(rounds.install_kind())"
    # from /: a checkout in the working directory (its egg-info) would answer instead
    p = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False, cwd="/")
    return p.stdout.strip() or "unknown"


def header(res: Results, what: str) -> str:
    lb = ", ".join(f"{x:.2f}" for x in res.load_before)
    la = ", ".join(f"{x:.2f}" for x in res.load_after)
    return (
        f"{what}: {res.rounds} interleaved rounds (order rotated each round)\n"
        f"load average before {lb}, after {la}; {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}; this process's nfd-gpu: {install_kind()}"
        + ("; PYTHONDONTWRITEBYTECODE set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "")
    )


def ms(x: float) -> str:
    return f"{x * 1000:.1f}" if x >= 0.01 else f"{x * 1000:.2f}"


def table(res: Results, ref: str | None, notes: dict[str, str] | None = None) -> str:
    """Markdown table: CPU, wall and wall less run-queue wait, medians with p10-p90, and
    per-round ratios to ``ref``."""
    notes = notes or {}
    head = "| contender | CPU ms median (p10-p90) | wall ms median (p10-p90) |"
    head += " wall less run-queue wait ms median (p10-p90) |"
    rule = "|---|---|---|---|"
    if ref:
        head += f" CPU / {ref} median (p10-p90) |"
        rule += "---|"
    lines = [head + " notes |", rule + "---|"]
    for n in res.names:
        row = f"| {n} |"
        for xs in (res.cpu(n), res.wall(n), res.ready(n)):
            row += f" {ms(statistics.median(xs))} ({ms(quantile(xs, 0.1))}-"
            row += f"{ms(quantile(xs, 0.9))}) |"
        if ref:
            if n == ref:
                row += " 1 |"
            else:
                r = res.ratios(n, ref)
                row += (
                    f" {statistics.median(r):.2f}x ({quantile(r, 0.1):.2f}-"
                    f"{quantile(r, 0.9):.2f}) |"
                )
        lines.append(row + f" {notes.get(n, '')} |")
    return "\n".join(lines)
