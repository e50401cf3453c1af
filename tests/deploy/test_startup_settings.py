"""The shipped CPU limit and startup probe fit the measured start-up: docs/install.md
"Start-up and the CPU limit" records benchmarks/startup.py's CPU-seconds to the first
publish; at the limit of every rendering (overlays, the chart's defaults) that start ends
before the first startup probe (``/startedz``, each second), the readiness probe has no
delay of its own (the kubelet runs it as the startup probe passes), and the docs state the
same limit and delay."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import renderings
from tests.deploy.test_manifests import OVERLAYS, REPO, agent_container, render

INSTALL = (REPO / "docs" / "install.md").read_text()


def _start_cpu_max() -> float:
    section = INSTALL[INSTALL.index("### Start-up and the CPU limit") :]
    m = re.search(r"([0-9.]+) s max", section)
    assert m, 'docs/install.md "Start-up and the CPU limit": no "<n> s max" measurement'
    return float(m.group(1))


def _cpu(q: str) -> float:
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def _check(container: dict[str, Any], where: str) -> None:
    limit = _cpu(str(container["resources"]["limits"]["cpu"]))
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/startedz", where
    assert startup["periodSeconds"] == 1, where  # Ready within a second of the start's end
    assert "initialDelaySeconds" not in container["readinessProbe"], where
    delay = startup.get("initialDelaySeconds", 0)
    start = _start_cpu_max() / limit
    assert start <= delay, (
        f"{where}: start-up {start:.1f} s at {limit:g} CPU > probe delay {delay} s"
    )
    assert f"limits {container['resources']['limits']['cpu']}/" in INSTALL, where
    assert f"readiness from\n  {delay} s" in INSTALL or f"starts at {delay} s" in INSTALL, where


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_limit_and_probe_fit_the_start(overlay: str) -> None:
    _check(agent_container(render(overlay)), f"deploy/overlays/{overlay}")


def test_chart_limit_and_probe_fit_the_start(tmp_path: Path) -> None:
    objs = renderings.helm_template({}, tmp_path)
    _check(agent_container(objs), "deploy/helm/nfd-gpu (defaults)")
