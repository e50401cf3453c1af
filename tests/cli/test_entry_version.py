"""``nfd-gpu --version`` is answered by the entry point (nfd_gpu/entry.py) before the typer
app is built; typer still defines the option. These check that the two agree: the flag
the entry answers is the root's eager ``--version`` option, the entry prints what typer
prints for it, and every other command line (and a shell-completion request) reaches
typer."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nfd_gpu import VERSION_FLAG, __version__, entry, version_line

REPO = Path(__file__).resolve().parents[2]

# The console entry in a fresh interpreter, as a script named nfd-gpu (typer names its
# completion variable after the program): its output, status and whether the typer app was
# built (nfd_gpu.cli imported).
CHILD = """
import contextlib, io, json, sys
from nfd_gpu.entry import console
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = console()
    except SystemExit as e:
        code = e.code
sys.__stdout__.write(json.dumps({"out": out.getvalue(), "code": code,
                                 "typer": "nfd_gpu.cli" in sys.modules}))
"""


def _console(tmp: Path, *args: str, **env: str) -> dict[str, object]:
    script = tmp / "nfd-gpu"
    script.write_text(CHILD, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_COMPLETE")}
    environ.update(env)
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    p = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    got: dict[str, object] = json.loads(p.stdout)
    return got


def _typer(argv: list[str]) -> tuple[int, str]:
    from nfd_gpu.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def test_the_flag_is_the_roots_eager_version_option() -> None:
    """typer owns the option: the root callback declares exactly the flag the entry
    answers, as an eager flag that takes no value."""
    import typer.main

    from nfd_gpu.cli import app

    root = typer.main.get_command(app)
    versions = [p for p in root.params if p.name == "version"]
    assert len(versions) == 1
    opt = versions[0]
    assert opt.opts == [VERSION_FLAG] and not opt.secondary_opts
    assert opt.is_eager and opt.is_flag and not opt.multiple
    assert VERSION_FLAG not in [o for p in root.params if p is not opt for o in p.opts]


def test_the_entry_prints_what_typer_prints(tmp_path: Path) -> None:
    assert _typer([VERSION_FLAG]) == (0, f"nfd-gpu {__version__}\n")
    got = _console(tmp_path, VERSION_FLAG)
    assert got == {"out": f"nfd-gpu {__version__}\n", "code": 0, "typer": False}
    assert _typer(["version"]) == (0, version_line() + "\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["--version", "scan"],
        ["scan", "--version"],
        ["--versio"],
        ["--version=1"],
        ["-V"],
        ["version"],
        ["--help"],
        [],
    ],
)
def test_every_other_command_line_goes_to_typer(argv: list[str], tmp_path: Path) -> None:
    assert not entry.answers_version(argv, {})
    got = _console(tmp_path, *argv)
    assert got["typer"] is True, got


def test_a_completion_request_goes_to_typer(tmp_path: Path) -> None:
    """typer's shell completion reads ``_NFD_GPU_COMPLETE``: with it set, the command line
    is completion input, not a --version request."""
    env = {"_NFD_GPU_COMPLETE": "bash_complete", "COMP_WORDS": "nfd-gpu --version",
           "COMP_CWORD": "1"}  # fmt: skip
    assert not entry.answers_version([VERSION_FLAG], env)
    got = _console(tmp_path, VERSION_FLAG, **env)
    assert got["typer"] is True, got
    assert got["out"] != f"nfd-gpu {__version__}\n"
