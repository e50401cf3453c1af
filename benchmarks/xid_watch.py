"""XID watcher cost when nothing happens: CPU per minute of an idle watcher.

The watcher (nfd_gpu/discovery/nvidia/events.py) on an NVML event set with no event, its
``nvmlEventSetWait`` replayed from a fixture's recording (replay.py: the wait blocks for
its timeout, as NVML's does in the driver, then raises ``Timeout``), side by side with a
peer: a bare thread that only waits on the same timeout (the least any timed wait loop
costs), and with no thread at all (the process's own background). Rounds are interleaved
(watcher, peer, none, watcher, ...); the main thread sleeps, so the process CPU time of a
round is the thread's. Reported: CPU milliseconds per minute, median over the rounds.

    python benchmarks/xid_watch.py [--rounds 3] [--seconds 10] [--wait-ms 2000]

On a GPU node the real library adds the ctypes call and the driver's own wait per wake-up;
the wake-ups per minute (60 / wait) are the same.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nfd_gpu.discovery.nvidia import replay  # noqa: E402
from nfd_gpu.discovery.nvidia.events import WAIT_MS, XidWatcher  # noqa: E402

RECORDING = os.path.join(ROOT, "tests", "fixtures", "sysfs", "h100-ecc-uncorrectable", "nvml.json")


def _cpu_over(seconds: float, start: object, stop: object) -> float:
    """Process CPU seconds used while ``start()``'s thread runs for ``seconds``."""
    start()  # type: ignore[operator]
    time.sleep(0.2)  # past the thread's start-up
    t0 = time.process_time()
    time.sleep(seconds)
    used = time.process_time() - t0
    stop()  # type: ignore[operator]
    return used


def watcher_round(seconds: float, wait_ms: int) -> float:
    w = XidWatcher(replay.load(RECORDING), wait_ms)
    return _cpu_over(seconds, lambda: w.start() or sys.exit("no event set"), w.stop)


def peer_round(seconds: float, wait_ms: int) -> float:
    done = threading.Event()

    def loop() -> None:
        while not done.wait(wait_ms / 1000):
            pass

    t = threading.Thread(target=loop, daemon=True)
    return _cpu_over(seconds, t.start, lambda: (done.set(), t.join()))


def none_round(seconds: float, wait_ms: int) -> float:
    return _cpu_over(seconds, lambda: None, lambda: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--wait-ms", type=int, default=WAIT_MS)
    a = ap.parse_args()
    runs: dict[str, list[float]] = {"xid watcher": [], "peer (bare wait loop)": [], "no thread": []}
    for _ in range(a.rounds):
        for name, fn in zip(runs, (watcher_round, peer_round, none_round), strict=True):
            runs[name].append(fn(a.seconds, a.wait_ms) / a.seconds * 60 * 1000)
    print(f"idle CPU, ms per minute (median of {a.rounds} x {a.seconds:g} s, wait {a.wait_ms} ms):")
    for name, vals in runs.items():
        rounds = ", ".join(f"{v:.3f}" for v in vals)
        print(f"  {name:24s} {statistics.median(vals):7.3f}   rounds: {rounds}")


if __name__ == "__main__":
    main()
