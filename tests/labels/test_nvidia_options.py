"""nvidia profile options: --mig-strategy, --sharing-config, gpu.clique from fabric info."""

from __future__ import annotations

from pathlib import Path

import pytest

from nfd_gpu.capture import capture_host
from nfd_gpu.cli import main
from nfd_gpu.config.sharing import load_sharing_config
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.labels.nvidia import NvidiaOptions
from nfd_gpu.scan import run_scan
from tests.conftest import DATA, GOLDEN, fixture_root
from tests.labels.nvidia_cases import OPTION_CASES, SHARING, fabric_fixture

NV = "nvidia.com"


def _golden(case: str) -> dict[str, str]:
    text = (GOLDEN / "nvidia" / "options" / f"{case}.labels").read_text()
    return dict(line.partition("=")[::2] for line in text.splitlines())


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_option_goldens(case: str) -> None:
    fixture, opts = OPTION_CASES[case]
    labels = run_scan(fixture_root(fixture), profiles=["nvidia"], nvidia_options=opts).labels
    assert labels == _golden(case)


def test_single_invalid_warns() -> None:
    r = run_scan(
        fixture_root("dgx-a100-mig-mixed"),
        profiles=["nvidia"],
        nvidia_options=NvidiaOptions(mig_strategy="single"),
    )
    assert r.labels[f"{NV}/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    assert r.labels[f"{NV}/gpu.count"] == "0"
    assert any("invalid MIG strategy single" in w for w in r.warnings)


def test_mps_with_mig_is_refused_with_a_warning() -> None:
    # GFD's isMPSCapable fails its labelling pass: nothing is written
    r = run_scan(
        fixture_root("dgx-a100-mig-mixed"),
        profiles=["nvidia"],
        nvidia_options=load_sharing_config(str(SHARING / "mps-2.yaml")),
    )
    assert r.labels == {}
    assert any("MPS sharing is not supported for MIG" in w for w in r.warnings)


def test_reference_config_example_loads() -> None:
    path = DATA / "nvidia" / "gfd_config_example.yaml"
    opts = load_sharing_config(str(path))
    assert opts.mig_strategy == "none"
    assert opts.sharing == "time-slicing"
    assert opts.replicas["nvidia.com/gpu"] == 4
    # the flag (or NFD_GPU_MIG_STRATEGY) wins over the file
    assert load_sharing_config(str(path), "mixed").mig_strategy == "mixed"


@pytest.mark.parametrize("found", ["auto", "nvml", "vfio"])
def test_discovery_strategy(found: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"flags: {{deviceDiscoveryStrategy: {found}}}\n")
    assert load_sharing_config(str(cfg)).discovery == found


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: v2\n", "unknown version"),
        ("- a\n", "mapping"),
        ("flags: {migStrategy: double}\n", "flags.migStrategy"),
        ("sharing: {timeSlicing: {resources: [{name: x, replicas: -1}]}}\n", "replicas"),
        # rejected as GFD does (device plugin api/config/v1/replicas.go)
        ("sharing: {mps: {resources: [{name: x, replicas: 1}]}}\n", "must be >= 2"),
        ("sharing: {timeSlicing: {resources: [{name: x}]}}\n", "no replicas specified"),
        ("flags: {deviceDiscoveryStrategy: pci}\n", "invalid option 'pci'"),
        ("flags: {failOnInitError: maybe}\n", "failOnInitError: expected true or false"),
        ("sharing: [\n", "not YAML"),
    ],
)
def test_bad_sharing_config(text: str, message: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_sharing_config(str(cfg))


def test_cli_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(fixture_root("h100-mig-single"))
    assert main(["scan", "--root", root, "-p", "nvidia", "--mig-strategy", "mixed"]) == 0
    assert f"{NV}/mig.strategy=mixed" in capsys.readouterr().out.splitlines()
    monkeypatch.setenv("NFD_GPU_MIG_STRATEGY", "none")
    assert main(["scan", "--root", root, "-p", "nvidia"]) == 0
    assert f"{NV}/mig.strategy" not in capsys.readouterr().out
    monkeypatch.delenv("NFD_GPU_MIG_STRATEGY")
    cfg = str(SHARING / "time-slicing-4.yaml")
    assert main(["scan", "--root", root, "-p", "nvidia", "--sharing-config", cfg]) == 0
    assert f"{NV}/gpu.replicas=0" in capsys.readouterr().out.splitlines()  # none: MIG GPUs
    args = ["scan", "--root", root, "-p", "nvidia", "--sharing-config", cfg]
    assert main([*args, "--mig-strategy", "single"]) == 0
    assert f"{NV}/gpu.replicas=4" in capsys.readouterr().out.splitlines()
    assert main(["scan", "--root", root, "--mig-strategy", "double"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v9\n")
    assert main(["scan", "--root", root, "--sharing-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown version" in err


CLUSTER = bytes(range(1, 17))


def test_clique_from_fabric_info(tmp_path: Path) -> None:
    root = fabric_fixture(tmp_path, [(CLUSTER, 7), (CLUSTER, 7)])
    r = run_scan(root, profiles=["nvidia"])
    assert r.labels[f"{NV}/gpu.clique"] == "01020304-0506-0708-090a-0b0c0d0e0f10.7"
    assert {g.nvidia.clique for g in r.snapshot.gpus} == {"01020304-0506-0708-090a-0b0c0d0e0f10.7"}
    # recorded through the adapter (fabric struct filled by the fake) and replayed
    dest = tmp_path / "snap"
    capture_host(dest, root, nvml_lib=nvml_replay.load(str(root / "nvml.json")))
    assert run_scan(dest, profiles=["nvidia"]).labels == r.labels


def test_no_clique_when_gpus_disagree_or_fabric_incomplete(tmp_path: Path) -> None:
    r = run_scan(fabric_fixture(tmp_path, [(CLUSTER, 7), (CLUSTER, 8)]), profiles=["nvidia"])
    assert f"{NV}/gpu.clique" not in r.labels
    assert any("several fabric cliques" in w for w in r.warnings)
    r = run_scan(fixture_root("h100-mig-single"), profiles=["nvidia"])
    assert f"{NV}/gpu.clique" not in r.labels


def test_agent_config_keys(tmp_path: Path) -> None:
    from nfd_gpu.agent import Agent
    from nfd_gpu.config import loader as config

    root = str(fixture_root("h100-mig-single"))
    cfg = config.load(
        env={"NFD_GPU_MIG_STRATEGY": "mixed"},
        flags={"root": root, "profiles": "nvidia", "oneshot": True, "outputs": "hook"},
    )
    assert cfg.mig_strategy == "mixed"
    assert Agent(cfg).scan().labels[f"{NV}/mig.strategy"] == "mixed"
    cfg = config.load(
        env={},
        flags={"root": root, "profiles": "nvidia", "oneshot": True, "outputs": "hook",
               "mig_strategy": "single",
               "sharing_config": str(SHARING / "time-slicing-4.yaml")},
    )  # fmt: skip
    assert Agent(cfg).scan().labels[f"{NV}/gpu.replicas"] == "4"
    with pytest.raises(config.ConfigError, match="mig_strategy"):
        config.load(env={"NFD_GPU_MIG_STRATEGY": "double"}, flags={"oneshot": True})


def test_agent_gfd_timestamp_fixed_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import time

    from nfd_gpu.agent import Agent
    from nfd_gpu.config import loader as config

    root = str(fixture_root("a100-t4"))
    flags = {"root": root, "profiles": "nvidia", "oneshot": True, "outputs": "hook"}
    off = Agent(config.load(env={}, flags=flags)).scan().labels
    assert f"{NV}/gfd.timestamp" not in off
    cfg = config.load(env={"NFD_GPU_GFD_TIMESTAMP": "true"}, flags=flags)
    assert cfg.gfd_timestamp is True
    agent = Agent(cfg)
    first = agent.scan().labels[f"{NV}/gfd.timestamp"]
    assert re.fullmatch(r"[0-9]{10}", first)
    assert first == str(agent.started)
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)  # an hour on: the same value
    assert agent.scan().labels == agent.scan().labels
    assert agent.scan().labels[f"{NV}/gfd.timestamp"] == first
    # with a sharing config too
    cfg = config.load(
        env={}, flags={**flags, "gfd_timestamp": True,
                       "sharing_config": str(SHARING / "time-slicing-4.yaml")},
    )  # fmt: skip
    agent = Agent(cfg)
    assert agent.scan().labels[f"{NV}/gfd.timestamp"] == str(agent.started)


def test_scan_gfd_timestamp_flag(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    root = str(fixture_root("a100-t4"))
    argv = ["scan", "--root", root, "-p", "nvidia", "--format", "labels"]
    for extra, present in (([], False), (["--gfd-timestamp"], True)):
        assert main([*argv, *extra]) == 0
        out = capsys.readouterr().out
        found = re.search(rf"^{NV}/gfd\.timestamp=([0-9]{{10}})$", out, re.M)
        assert (found is not None) is present


def test_a_non_utf8_sharing_config_is_one_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"version: v1\n\xff\n")
    root = str(fixture_root("h100-mig-single"))
    assert main(["scan", "--root", root, "-p", "nvidia", "--sharing-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"nfd-gpu: error: --sharing-config {bad}: not UTF-8 (byte 12)\n"
