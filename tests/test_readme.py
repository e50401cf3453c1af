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


def test_layout_block_names_real_files() -> None:
    """Every ``nfd_gpu/...`` entry of the Layout block exists, and every ``*.py`` its
    description names is in that directory (a file entry: beside it)."""
    block = re.search(r"## Layout\n.*?```\n(.*?)```", README, re.S)
    assert block
    entry = None
    checked = 0
    for line in block.group(1).splitlines():
        head = line.split()[0] if line.strip() and not line.startswith(" ") else None
        if head is not None:
            entry = REPO / head if head.startswith("nfd_gpu") else None
            if entry is not None:
                assert entry.exists(), head
        if entry is None:
            continue
        where = entry if entry.is_dir() else entry.parent
        for name in re.findall(r"\b([a-z_]+\.py)\b", line.replace(head or "", "", 1)):
            assert list(where.rglob(name)), (line, name)
            checked += 1
    assert checked > 20


def test_helm_quick_start_is_the_install_docs() -> None:
    """The README's Helm quick start is docs/install.md's step 2a, which
    tests/e2e/test_install_doc.py runs on a real API server (namespace labelled for the
    Pod Security level the hostPath volumes need, then ``helm install``)."""
    block = re.search(
        r"```bash\nkubectl apply -k deploy/overlays/nodefeature-api\n(.*?)```", README, re.S
    )
    assert block
    readme = [ln for ln in block.group(1).splitlines() if ln and not ln.startswith("#")]
    install = (REPO / "docs" / "install.md").read_text()
    step = re.search(r"^## 2a\. nfd-gpu with Helm\n\n```sh\n(.*?)```", install, re.S | re.M)
    assert step
    assert readme == step.group(1).splitlines()
    assert "--create-namespace" not in " ".join(readme)
