"""Profile options: one table, checked at the CLI and the config, documented."""

from __future__ import annotations

import re

import pytest

from nfd_gpu.cli import main
from nfd_gpu.config import loader as config
from nfd_gpu.labels.options import PROFILE_OPTIONS, check, selected
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root


def test_every_option_is_documented() -> None:
    doc = (REPO / "docs/configuration.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| `([a-z]+)` \|", doc, re.M))
    assert rows == {name: profile for name, (profile, _) in PROFILE_OPTIONS.items()}


def test_check_and_of() -> None:
    assert check(["amd-beta"], ["amd"]) is None
    assert "needs the amd profile" in (check(["amd-beta"], ["neutral"]) or "")
    assert "unknown profile option" in (check(["amd-gamma"], ["amd"]) or "")
    assert selected("amd", ["amd-beta", "amd-mode"]) == {"beta", "mode"}


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    root = str(fixture_root("mi210-8x"))
    assert main(["scan", "--root", root, "-p", "amd", "--profile-option", "amd-beta"]) == 0
    assert "beta.amd.com/gpu.cu-count.104=8" in capsys.readouterr().out.splitlines()
    assert main(["scan", "--root", root, "--profile-option", "amd-beta"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs the amd profile" in err


def test_config() -> None:
    cfg = config.load(
        env={"NFD_GPU_PROFILE_OPTIONS": "amd-beta,amd-mode"},
        flags={"profiles": "amd", "oneshot": True},
    )
    assert cfg.profile_options == ("amd-beta", "amd-mode")
    with pytest.raises(config.ConfigError, match="amd-nope"):
        config.load(env={}, flags={"profiles": "amd", "profile_options": "amd-nope"})


def test_amd_require_amdgpu() -> None:
    # the SR-IOV host's AMD GPUs are bound to gim, not amdgpu: the labeller, which finds GPUs
    # through amdgpu, writes nothing there; the option does the same
    root = str(fixture_root("mi300x-sriov-host"))
    assert all(g.driver != "amdgpu" for g in run_scan(root).snapshot.gpus if g.vendor == "amd")
    assert "amd.com/gpu.device-id" in " ".join(run_scan(root, profiles=("amd",)).labels)
    opts = ("amd-require-amdgpu",)
    assert run_scan(root, profiles=("amd",), profile_options=opts).labels == {}
    # where amdgpu is bound the option changes nothing
    bound = str(fixture_root("mi210-8x"))
    with_opt = run_scan(bound, profiles=("amd",), profile_options=opts).labels
    assert with_opt == run_scan(bound, profiles=("amd",)).labels != {}
