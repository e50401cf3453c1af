"""The watch's stop under a signal: SIGTERM's handler (``Sink.abort``) runs on the main
thread, which may be inside ``stop()`` already (a reload's ``detach``, the exit's
``close``); the nested stop must not wait on a lock its own thread holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import signal
    from nfd_gpu.sinks.nodefeature import NodeFeatureSink

    sink = NodeFeatureSink(node_name="node-a", namespace="nfd", watch=False)
    sink._start_watch = lambda: None
    from nfd_gpu.sinks.nodefeature_watch import OwnObjectWatch

    watch = OwnObjectWatch(
        api_client=None, group="g", version="v", namespace="nfd", plural="p",
        name="n", on_event=lambda *_: None, duration=60, timeout=1,
    )
    sink._watch = watch
    signal.signal(signal.SIGTERM, lambda *_: sink.abort())
    lock = watch._lock

    class SignalInside:
        # SIGTERM lands while the main thread holds the watch's lock (inside stop())
        raised = False
        def __enter__(self):
            lock.__enter__()
            if not SignalInside.raised:
                SignalInside.raised = True
                signal.raise_signal(signal.SIGTERM)
        def __exit__(self, *exc):
            return lock.__exit__(*exc)

    watch._lock = SignalInside()
    sink.close()
    print("stopped")
    """
)


def test_sigterm_inside_the_watch_stop_does_not_deadlock() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=20, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stopped"
