"""The CLI as users run it: a subprocess, exit codes, formats, one-line errors."""

from __future__ import annotations

import json
import subprocess

import yaml

from tests.conftest import ALL_FIXTURES, fixture_root, nfd_gpu_cmd


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nfd_gpu_cmd() + args, capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_scan_labels_sorted(subprocess_env: dict[str, str]) -> None:
    p = run(["scan", "--root", str(fixture_root("hgx-h100"))], subprocess_env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    keys = [line.partition("=")[0] for line in lines]
    assert keys == sorted(keys)
    assert "gpu.feature.node.kubernetes.io/count=8" in lines


def test_scan_json_shape(subprocess_env: dict[str, str]) -> None:
    p = run(["scan", "--root", str(fixture_root("broken")), "--format", "json"], subprocess_env)
    assert p.returncode == 0
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert set(doc) == {"apiVersion", "labels", "features", "gpus", "warnings"}
    assert doc["warnings"]
    assert set(doc["features"]) == {"flags", "attributes", "instances"}


def test_scan_yaml_and_table(subprocess_env: dict[str, str]) -> None:
    p = run(["scan", "--root", str(fixture_root("mi210-8x")), "-f", "yaml"], subprocess_env)
    assert p.returncode == 0
    doc = yaml.safe_load(p.stdout)
    assert doc["labels"]["gpu.feature.node.kubernetes.io/count"] == "8"
    p = run(["scan", "--root", str(fixture_root("mi210-8x")), "-f", "table"], subprocess_env)
    assert p.returncode == 0
    assert p.stdout.count("AMD Instinct MI210") == 8
    assert "8 GPU(s)" in p.stdout


def test_env_root(subprocess_env: dict[str, str]) -> None:
    env = dict(subprocess_env, NFD_GPU_ROOT=str(fixture_root("passthrough-host")))
    p = run(["scan"], env)
    assert "gpu.feature.node.kubernetes.io/mode=pf-passthrough" in p.stdout.splitlines()


def test_every_fixture_exits_zero_without_traceback(subprocess_env: dict[str, str]) -> None:
    for name in ALL_FIXTURES:
        p = run(["scan", "--root", str(fixture_root(name)), "-f", "json"], subprocess_env)
        assert p.returncode == 0, (name, p.stderr)
        assert "Traceback" not in p.stderr


def test_bad_root_is_one_line_exit_2(subprocess_env: dict[str, str], tmp_path: object) -> None:
    p = run(["scan", "--root", "/definitely/not/here"], subprocess_env)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0
    assert "/definitely/not/here" in p.stderr and "not a directory" in p.stderr


def test_bad_flag_is_one_line_exit_2(subprocess_env: dict[str, str]) -> None:
    for args in (["scan", "--bogus"], ["scan", "--format", "xml"], ["nosuchcommand"]):
        p = run(args, subprocess_env)
        assert p.returncode == 2, args
        assert p.stderr.strip().count("\n") == 0, p.stderr
        assert "error" in p.stderr


def test_version_and_help(subprocess_env: dict[str, str]) -> None:
    p = run(["version"], subprocess_env)
    assert p.returncode == 0 and p.stdout.startswith("nfd-gpu ")
    for args in (["--help"], ["scan", "--help"], ["version", "--help"]):
        p = run(args, subprocess_env)
        assert p.returncode == 0 and "Usage" in p.stdout, args
    # the settings' help templates are filled as the help is written, not at a parse
    for command in ("scan", "run"):
        p = run([command, "--help"], {**subprocess_env, "COLUMNS": "200"})
        assert p.returncode == 0 and "{" not in p.stdout, p.stdout
        assert "neutral" in p.stdout and "gfd" in p.stdout, p.stdout  # --profile's choices


def test_scan_host_root(subprocess_env: dict[str, str]) -> None:
    p = run(["scan", "--root", "/"], subprocess_env)
    assert p.returncode == 0
    assert "Traceback" not in p.stderr


def test_scan_profile_amd(subprocess_env: dict[str, str]) -> None:
    root = str(fixture_root("mi210-8x"))
    p = run(["scan", "--root", root, "--profile", "neutral", "--profile", "amd"], subprocess_env)
    assert p.returncode == 0, p.stderr
    assert "amd.com/gpu.cu-count=104" in p.stdout.splitlines()
    assert "gpu.feature.node.kubernetes.io/count=8" in p.stdout.splitlines()
    p = run(["scan", "--root", root, "--profile", "amd"], subprocess_env)
    assert all(line.startswith("amd.com/") for line in p.stdout.splitlines())
    p = run(["scan", "--root", root, "--profile", "bogus"], subprocess_env)
    assert p.returncode == 2
    assert "--profile bogus: unknown" in p.stderr


def test_scan_without_gpus_says_so() -> None:
    """``scan --root /`` on a host without GPUs: no labels, and one stderr line saying why
    (exit 0: nothing is wrong)."""
    root = fixture_root("vm-no-gpu")
    p = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--root", str(root)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert p.stderr == f"nfd-gpu: no GPU found under {root} (6 PCI function(s) read)\n"
    with_gpus = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--root", str(fixture_root("hgx-h100"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert with_gpus.returncode == 0 and "no GPU found" not in with_gpus.stderr
