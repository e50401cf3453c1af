"""``scan`` and ``run --oneshot --dry-run`` give the same labels for the same flags: one
builder makes the nvidia profile's options for both (sharing_config.nvidia_options), and a
MIG strategy that was given applies whatever its value, as in GFD (a sharing config's
``flags.migStrategy`` decides only when none was given)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nfd_gpu.cli import app
from nfd_gpu.labels.nvidia_options import MIG_STRATEGIES
from tests.conftest import ALL_FIXTURES, FIXTURES, fixture_root

SHARING = sorted((FIXTURES.parent / "sharing").glob("*.yaml"))
STRATEGIES = (None, *MIG_STRATEGIES)  # not given, then each: auto, none, single, mixed


def _labels(text: str) -> dict[str, str]:
    lines = (ln for ln in text.splitlines() if "=" in ln and not ln.startswith("#"))
    return dict(ln.split("=", 1) for ln in lines)


def scan_and_run(root: Path, flags: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    runner = CliRunner()
    scan = runner.invoke(app, ["scan", "--root", str(root), *flags])
    assert scan.exit_code == 0, scan.output
    run = runner.invoke(app, ["run", "--oneshot", "--dry-run", "--root", str(root), *flags])
    assert run.exit_code == 0, run.output
    return _labels(scan.stdout), _labels(run.stdout)


@pytest.mark.parametrize("sharing", [None, *SHARING], ids=lambda p: p.stem if p else "no-config")
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s or "not-given")
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_scan_equals_run(name: str, strategy: str | None, sharing: Path | None) -> None:
    flags = ["--profile", "neutral", "--profile", "nvidia"]
    flags += ["--mig-strategy", strategy] if strategy else []
    flags += ["--sharing-config", str(sharing)] if sharing else []
    scan, run = scan_and_run(fixture_root(name), flags)
    assert scan == run


def test_given_strategy_wins_over_the_file(tmp_path: Path) -> None:
    # the file says mixed: a given --mig-strategy none applies (GFD's IsSet precedence),
    # not given, the file's mixed does; scan and run agree on both
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text("version: v1\nflags:\n  migStrategy: mixed\n")
    root = fixture_root("dgx-a100-mig-mixed")
    given = ["--profile", "nvidia", "--sharing-config", str(cfg), "--mig-strategy", "none"]
    scan, run = scan_and_run(root, given)
    assert scan == run and "nvidia.com/mig.strategy" not in scan
    scan, run = scan_and_run(root, given[:-2])
    assert scan == run and scan["nvidia.com/mig.strategy"] == "mixed"


def test_profile_list_syntax() -> None:
    # `--profile neutral,nvidia` as run accepts it
    root = fixture_root("h100-mig-single")
    listed = scan_and_run(root, ["--profile", "neutral,nvidia"])
    repeated = scan_and_run(root, ["--profile", "neutral", "--profile", "nvidia"])
    assert listed == repeated
    assert any(k.startswith("nvidia.com/") for k in listed[0])
    assert any(k.startswith("gpu.feature.node.kubernetes.io/") for k in listed[0])
