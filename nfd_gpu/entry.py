"""The ``nfd-gpu`` process (``[project.scripts]``): SIGTERM and SIGINT end it at once from its
first instruction until a command installs its own handlers (the agent's loop does).

The agent is PID 1 in its container, where the kernel drops a signal that has no handler:
without this, a pod deleted while the agent imports and starts (seconds at its CPU limit)
waited out its whole grace period. Nothing is published before the loop runs, so exiting
there loses nothing; the status is the shell's for a death by that signal (128 + number).
"""

import os
import signal
import sys
from types import FrameType


def _exit_now(signum: int, _frame: FrameType | None) -> None:
    os._exit(128 + signum)


def console() -> int:
    """Install the start-up handlers, then run the command line (``nfd_gpu.cli.console``)."""
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    from nfd_gpu.cli import console as cli_console  # the heavy imports, after the handlers

    return cli_console()


if __name__ == "__main__":
    sys.exit(console())
