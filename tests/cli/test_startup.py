"""What a command imports: ``nfd-gpu scan`` loads only what a scan needs (issue 24: CLI
start-up). A structural check of the import graph, in a fresh interpreter per command,
not a timing test: a heavy module that creeps back into the scan path fails here by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/sysfs/hgx-h100"

CHILD = """
import contextlib, io, sys
from nfd_gpu.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
modules = sorted(sys.modules)
import json  # after the list: the command may not have loaded it
print(json.dumps({"code": code, "modules": modules}))
"""

# Never needed by a scan without rules on the default profile: the cluster client and
# metrics (agent outputs), YAML and the rules engine (rules, config, --format yaml), the
# NVML binding (NVML off), the agent, config and capture code, the vendor label profiles,
# click besides the click typer vendors (typer >= 0.28), rich (help only).
NOT_FOR_SCAN = (
    "kubernetes",
    "prometheus_client",
    "yaml",
    "re2",
    "jsonschema",
    "pynvml",
    "pyudev",
    "rich",
    "nfd_gpu.rules",
    "nfd_gpu.agent",
    "nfd_gpu.sinks",
    "nfd_gpu.inventory",
    "nfd_gpu.agent.metrics",
    "nfd_gpu.config.loader",
    "nfd_gpu.config.yamlfile",
    "nfd_gpu.capture",
    "nfd_gpu.config.sharing",
    "nfd_gpu.labels.nvidia",
    "nfd_gpu.labels.amd",
    "nfd_gpu.labels.intel",
    # the other commands' modules: the root group builds a command when it is named
    "nfd_gpu.cli.run",
    "nfd_gpu.cli.capture",
    "nfd_gpu.cli.inventory",
    "nfd_gpu.cli.rules",
)


def _loaded(*args: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``nfd-gpu ARGS`` (exit 0)."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["code"] == 0, (args, out.stderr)
    return set(got["modules"])


def _heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(tuple(f"{n}." for n in names)))


def _click_besides_typers() -> bool:
    """typer >= 0.28 runs on its own copy of click (``typer._click``)."""
    import importlib.util

    return importlib.util.find_spec("typer._click") is not None


@pytest.mark.parametrize("fmt", ["labels", "json", "table"])
def test_scan_imports_nothing_it_does_not_use(fmt: str) -> None:
    mods = _loaded("scan", "--root", str(FIXTURE), "--nvml", "off", "--format", fmt)
    assert "nfd_gpu.scan" in mods  # the scan ran in this interpreter
    assert _heavy(mods, NOT_FOR_SCAN) == []
    if _click_besides_typers():
        assert _heavy(mods, ("click",)) == []
    if fmt != "json":
        assert _heavy(mods, ("json",)) == []  # the JSON codec: only for --format json


def test_rules_load_the_engine_only_when_given() -> None:
    """The counter-check: the same child sees what a scan with rules needs."""
    mods = _loaded("scan", "--root", str(FIXTURE), "--nvml", "off", "--rules", str(REPO / "rules"))
    assert {"nfd_gpu.rules", "yaml"} <= mods
    assert _heavy(mods, ("kubernetes", "prometheus_client", "nfd_gpu.agent")) == []


@pytest.mark.parametrize("args", [["version"], ["--help"], ["scan", "--help"]])
def test_version_and_help_load_no_scan_code(args: list[str]) -> None:
    mods = _loaded(*args)
    assert _heavy(mods, ("nfd_gpu.scan", "nfd_gpu.discovery", "nfd_gpu.host")) == []
    # typer writes help with rich; the root's help lists every command, so builds them all
    help_only = ("rich", "nfd_gpu.cli.") if args == ["--help"] else ("rich",)
    if "--help" not in args:
        help_only = ("-",)
    assert [m for m in _heavy(mods, NOT_FOR_SCAN) if not m.startswith(help_only)] == []


def test_the_agent_builds_no_other_command() -> None:
    """``run`` imports neither the other commands' modules nor their code."""
    args = ("run", "--oneshot", "--no-udev", "--dry-run", "--nvml", "off", "--root", str(FIXTURE))
    mods = _loaded(*args)
    assert "nfd_gpu.agent" in mods
    others = ("nfd_gpu.cli.capture", "nfd_gpu.cli.inventory", "nfd_gpu.cli.rules")
    assert _heavy(mods, (*others, "nfd_gpu.inventory", "nfd_gpu.capture")) == []


# The console entry in a fresh interpreter: the command's status and whether the cyclic
# garbage collector is on once the command has returned.
GC_CHILD = """
import contextlib, gc, io, json, sys
from nfd_gpu.entry import console
with contextlib.redirect_stdout(io.StringIO()):
    code = console()
print(json.dumps({"code": code, "gc": gc.isenabled()}))
"""


def _collector_after(tmp_path: Path, *args: str) -> dict[str, object]:
    # no cluster: an empty HOME, no KUBECONFIG, no in-cluster environment
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", GC_CHILD, *args], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def test_one_shot_commands_run_without_the_cyclic_collector(tmp_path: Path) -> None:
    """Start-up's objects live as long as the process: no collection walks them (entry.py)."""
    got = _collector_after(tmp_path, "scan", "--root", str(FIXTURE), "--nvml", "off")
    assert got == {"code": 0, "gc": False}


def test_the_agent_runs_with_the_collector_on(tmp_path: Path) -> None:
    """``run`` lives long: the collector the entry turned off is on again for its loop."""
    args = ("run", "--oneshot", "--no-udev", "--dry-run", "--nvml", "off", "--root", str(FIXTURE))
    assert _collector_after(tmp_path, *args) == {"code": 0, "gc": True}
