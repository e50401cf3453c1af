"""An unlistable ``--rules`` directory (the image runs as non-root): one line naming the
directory, the last good labels kept, no traceback; the CLI's strict load says the same
line. Root lists through mode 000, so as root (CI) the agent runs in a forked child that
has dropped to uid/gid 65534 first."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.config import loader as config
from nfd_gpu.rules import RuleError, load_rules
from tests.conftest import REPO, fixture_root
from tests.hostile.test_last_valid_config import MIG_READY, Recorder


def _as_nobody(body: Any) -> Any:
    """``body()``'s JSON answer, run in a child without root's read-through."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.close(rd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            os.write(wr, json.dumps(body()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    with os.fdopen(rd, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child raised"
    return json.loads(answer)


@pytest.fixture
def rules_dir() -> Any:
    tmp = Path(tempfile.mkdtemp(prefix="nfd-gpu-rules-"))
    tmp.chmod(0o777)
    try:
        yield tmp / "rules.d"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_unlistable_rules_directory_keeps_the_labels(rules_dir: Path) -> None:
    def body() -> dict[str, Any]:
        rules_dir.mkdir()
        shutil.copy(REPO / "rules" / "mig-ready.yaml", rules_dir)
        lines: list[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda r: lines.append(r.getMessage())  # type: ignore[method-assign]
        logging.getLogger().addHandler(handler)
        root = str(fixture_root("hgx-h100"))
        cfg = config.load(env={}, flags={"root": root, "outputs": "hook", "rules": str(rules_dir)})
        rec = Recorder()
        agent = Agent(cfg, sinks=[rec])
        agent.run_pass()
        rules_dir.chmod(0)
        ok = [agent.run_pass() for _ in range(3)]
        rules_dir.chmod(0o755)
        return {"published": rec.published, "ok": ok, "lines": lines}

    got = _as_nobody(body)
    good = got["published"][0]
    assert good[MIG_READY] == "true"
    assert all(p == good for p in got["published"])
    assert len(got["published"]) == 4, got["lines"]  # every pass published
    warned = [m for m in got["lines"] if str(rules_dir) in m]
    assert warned == [
        f"{rules_dir}: cannot list the directory: Permission denied; keeping its last valid version"
    ], got["lines"]
    assert not any("Traceback" in m or "pass failed" in m for m in got["lines"]), got["lines"]


def test_unlistable_rules_directory_is_one_line_for_the_cli(rules_dir: Path) -> None:
    def body() -> list[str]:
        rules_dir.mkdir(mode=0)
        try:
            load_rules(rules_dir)
        except RuleError as e:
            return [str(e), *load_rules(rules_dir, tolerant=True).problems]
        return []

    line = f"{rules_dir}: cannot list the directory: Permission denied"
    assert _as_nobody(body) == [line, line]
