"""README.md's samples are the real commands' output: each ``$ nfd-gpu ...`` block is run
(from the repository root) and compared, line for line or up to its ``...`` elision."""

from __future__ import annotations

import re
import shlex
import subprocess

from tests.conftest import REPO, nfd_gpu_cmd

README = (REPO / "README.md").read_text()
SAMPLE = re.compile(r"```\n\$ (nfd-gpu [^\n]+)\n(.*?)```", re.S)


def test_readme_has_the_scan_samples() -> None:
    cmds = [m.group(1) for m in SAMPLE.finditer(README)]
    assert "nfd-gpu scan --root tests/fixtures/sysfs/hgx-h100" in cmds, cmds


def test_readme_samples_are_the_real_output() -> None:
    for m in SAMPLE.finditer(README):
        cmd, shown = m.group(1), m.group(2).splitlines()
        p = subprocess.run(
            [*nfd_gpu_cmd(), *shlex.split(cmd)[1:]],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert p.returncode == 0, (cmd, p.stderr)
        real = p.stdout.splitlines()
        if "..." in shown:  # head ... tail
            cut = shown.index("...")
            head, tail = shown[:cut], shown[cut + 1 :]
            assert real[: len(head)] == head, cmd
            assert real[len(real) - len(tail) :] == tail, cmd
        else:
            assert real == shown, cmd
