"""The ``nfd-gpu`` process of ``[project.scripts]``: SIGTERM and SIGINT end it at once.

That holds from its first instruction until a command installs its own handlers, as the
agent's loop does.

- The agent is PID 1 in its container, where the kernel drops a signal that has no
  handler.
- Without this, a pod deleted while the agent imports and starts waited out its whole
  grace period. Starting takes seconds at its CPU limit.
- Nothing is published before the loop runs, so exiting there loses nothing.
- The status is the shell's for a death by that signal: 128 + number.

``nfd-gpu --version`` alone is answered here, before the command line is built.

- typer defines the option: ``nfd_gpu.cli``'s root callback, eager.
- For that one command line it prints what :func:`version_line` returns and exits 0.
- Building the typer app first costs that command about 5x the interpreter's own start.
- Any other command line goes to typer.
- So does any run with a shell-completion request in the environment: typer's
  ``_<PROG>_COMPLETE``.
- tests/cli/test_entry_version.py checks that the two agree.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

from nfd_gpu import VERSION_FLAG, version_line

TYPE_CHECKING = False  # not typing's: nothing is imported here that --version does not use
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import FrameType


def _exit_now(signum: int, _frame: FrameType | None) -> None:
    os._exit(128 + signum)


def answers_version(argv: list[str], environ: Mapping[str, str]) -> bool:
    """This command line is ``--version`` alone, with no shell completion asked.

    typer would answer it with :func:`version_line` and exit status 0.
    """
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in environ)
    return argv == [VERSION_FLAG] and not completing


def console() -> int:
    """Install the start-up handlers, then run the command line by ``nfd_gpu.cli.console``.

    The cyclic garbage collector is off from here on (:func:`gc.disable`).

    - Start-up makes objects that live as long as the process: modules, classes, the app.
    - Their allocations would run ~50 young and a few older collections that find nothing
      to free: ~9% of a 27-function ``scan``'s CPU time (benchmarks/cli.py).
    - The one-shot commands end with it off: their garbage lives until the process ends.
    - ``run``, the long-lived agent, turns it back on after its start-up
      (``nfd_gpu.cli.run.main_run``).
    """
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    if answers_version(sys.argv[1:], os.environ):
        try:
            print(version_line(), flush=True)
        except BrokenPipeError:  # as typer's path (nfd_gpu.cli.main)
            return 0
        return 0
    gc.disable()
    from nfd_gpu.cli import console as cli_console  # the heavy imports, after the handlers

    return cli_console()


if __name__ == "__main__":
    sys.exit(console())
