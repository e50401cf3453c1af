"""Every line the CLI prints is one line of its own (issue 34, finding 8).

A newline or a right-to-left override (U+202E) in a name the host provides (here a
directory entry under /sys/bus/pci/devices, which the scan warns about) forged a stderr
line of ``nfd-gpu scan`` (``warning: ...`` of the attacker's choosing) or reordered one on
a terminal. Now controls and bidi controls are printed escaped (``\\n``, ``\\u202e``), by
the CLI (``nfd_gpu.text.shown``) and by the agent's text log alike.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import fixture_root, nfd_gpu_cmd

FORGED = "warning: nvidia GPU 0000:01:00.0 lost, all labels removed"


def _hostile_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    devices = root / "sys/bus/pci/devices"
    (devices / f"x\n{FORGED}").mkdir()
    (devices / "evil\u202eflog.txt").mkdir()
    (devices / "esc\x1b[2J").mkdir()
    return root


def test_scan_stderr_lines_cannot_be_forged(tmp_path: Path) -> None:
    root = _hostile_root(tmp_path)
    p = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--nvml", "off", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert not any(line.startswith(FORGED) for line in lines), p.stderr
    assert all(line.startswith(("warning: ", "nfd-gpu: ")) for line in lines), lines
    assert "\u202e" not in p.stderr + p.stdout and "\x1b" not in p.stderr + p.stdout
    assert any("x\\nwarning: nvidia GPU" in line for line in lines), lines
    assert any("evil\\u202eflog.txt" in line for line in lines), lines


def test_agent_log_lines_cannot_be_forged(tmp_path: Path) -> None:
    root = _hostile_root(tmp_path)
    p = subprocess.run(
        [*nfd_gpu_cmd(), "run", "--oneshot", "--no-udev", "--nvml", "off", "--root",
         str(root), "--features-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "\u202e" not in p.stderr
    assert not any(line.startswith(FORGED) for line in p.stderr.splitlines())
    assert "evil\\u202eflog.txt" in p.stderr, p.stderr
