"""Day-2 operation: --version, shell completion, the agent's start-up and change log lines,
feature-file write log lines."""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nfd_gpu import __version__, cli
from nfd_gpu.agent import Agent, label_changes, nvml_state
from nfd_gpu.config.loader import Config
from nfd_gpu.sinks.featurefile import FeatureFileSink
from tests.conftest import fixture_root, nfd_gpu_cmd


def test_root_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"nfd-gpu {__version__}\n"
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out == f"nfd-gpu {__version__}\n"


def _complete(words: str, cword: int, env: dict[str, str]) -> list[str]:
    env = dict(env, COMP_WORDS=words, COMP_CWORD=str(cword), _NFD_GPU_COMPLETE="complete_bash")
    # The completion variable is derived from the program name: run the console script's
    # module with argv[0] "nfd-gpu" as an installed console script has it.
    code = "import sys; sys.argv[0] = 'nfd-gpu'; from nfd_gpu.cli import main; sys.exit(main())"
    p = subprocess.run(
        [nfd_gpu_cmd()[0], "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_shell_completion(subprocess_env: dict[str, str]) -> None:
    assert _complete("nfd-gpu sc", 1, subprocess_env) == ["scan"]
    assert "snapshot" in _complete("nfd-gpu s", 1, subprocess_env)
    assert _complete("nfd-gpu scan --format ", 3, subprocess_env) == [
        "labels",
        "json",
        "yaml",
        "table",
        "dra-preview",
    ]
    assert "--oneshot" in _complete("nfd-gpu run --one", 2, subprocess_env)


def test_shell_completion_of_setting_values(subprocess_env: dict[str, str]) -> None:
    """Every option with a fixed set of values completes them (settings.py ``choices``),
    a comma-separated list its last item."""
    from nfd_gpu.config.settings import choices

    env = subprocess_env
    assert _complete("nfd-gpu run --output ", 3, env) == list(choices("outputs"))
    assert _complete("nfd-gpu run --output featurefile,n", 3, env) == ["featurefile,nodefeature"]
    assert _complete("nfd-gpu run --profile ", 3, env) == list(choices("profiles"))
    assert _complete("nfd-gpu scan --profile n", 3, env) == ["neutral", "nvidia"]
    assert _complete("nfd-gpu run --nvml ", 3, env) == ["auto", "on", "off"]
    assert _complete("nfd-gpu scan --nvml o", 3, env) == ["on", "off"]
    assert _complete("nfd-gpu run --log-level ", 3, env) == ["debug", "info", "warning", "error"]
    assert _complete("nfd-gpu run --mig-strategy ", 3, env) == list(choices("mig_strategy"))
    assert _complete("nfd-gpu scan --mig-strategy m", 3, env) == ["mixed"]


def test_run_help_names_the_environment_variables(subprocess_env: dict[str, str]) -> None:
    from nfd_gpu.config.settings import SETTINGS, env_var

    p = subprocess.run(
        [*nfd_gpu_cmd(), "run", "--help"],
        env=dict(subprocess_env, COLUMNS="200", TERM="dumb"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    for key, s in SETTINGS.items():
        if s.run_help is not None:
            assert f"[env var: {env_var(key)}]" in p.stdout, key
    assert "[env var: NFD_GPU_CONFIG]" in p.stdout


def test_show_completion_prints_a_bash_script(subprocess_env: dict[str, str]) -> None:
    code = "import sys; sys.argv[0] = 'nfd-gpu'; from nfd_gpu.cli import main; sys.exit(main())"
    p = subprocess.run(
        [nfd_gpu_cmd()[0], "-c", code, "--show-completion", "bash"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "complete -o default -F _nfd_gpu_completion nfd-gpu" in p.stdout


def test_label_changes() -> None:
    assert label_changes(None, {"a": "1"}) == (1, 0, 0)
    assert label_changes({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == (1, 0, 1)
    assert label_changes({"a": "1", "b": "2"}, {}) == (0, 2, 0)
    assert label_changes({"a": "1"}, {"a": "1"}) == (0, 0, 0)
    assert label_changes({"a": "", "b": "2"}, {"a": "x", "c": ""}) == (1, 1, 1)


def test_nvml_state() -> None:
    rec = fixture_root("h200-vm") / "nvml.json"
    assert rec.is_file()
    assert nvml_state("auto", str(fixture_root("h200-vm"))) == f"auto: replay {rec}"
    assert nvml_state("on", str(fixture_root("h200-vm"))) == f"on: replay {rec}"
    assert nvml_state("off", str(fixture_root("h200-vm"))) == "off"
    # No recording: the library is asked (no NVIDIA driver on a CI machine).
    state = nvml_state("auto", str(fixture_root("mi210-8x")))
    assert state.startswith(("auto: library unavailable (", "auto: library ok")), state


def test_nvml_state_without_the_library_does_not_import_pynvml() -> None:
    """Where libnvidia-ml does not open (any node without NVIDIA's driver), the start-up line
    says why without importing nvidia-ml-py: 5,000 lines, ~30 ms of the agent's start."""
    child = (
        "import json, sys; from nfd_gpu.agent.startup import nvml_state; "
        "from nfd_gpu.discovery.nvidia import nvml; "
        f"s = nvml_state('auto', {str(fixture_root('mi210-8x'))!r}); "
        "print(json.dumps([s, nvml.library_error(), 'pynvml' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    state, missing, imported = json.loads(out.stdout)
    if missing is None:  # a machine with NVIDIA's driver: the library is asked
        assert state.startswith("auto: library ") and imported, state
        return
    assert state == f"auto: library unavailable ({missing})"
    assert "libnvidia-ml.so.1" in missing and not imported


def test_nvml_state_reads_the_recording_inside_the_root(tmp_path: Path) -> None:
    """An absolute link is resolved below the root, as the scan's HostRoot does: a link to
    the real recording's absolute path is not the root's recording."""
    outside = fixture_root("h200-vm") / "nvml.json"
    (tmp_path / "nvml.json").symlink_to(outside)  # resolves to <root><outside>: absent
    assert not nvml_state("auto", str(tmp_path)).startswith("auto: replay")
    inside = tmp_path / "recordings" / "nvml.json"
    inside.parent.mkdir()
    inside.write_bytes(outside.read_bytes())
    (tmp_path / "nvml.json").unlink()
    (tmp_path / "nvml.json").symlink_to("/recordings/nvml.json")  # inside the root
    assert nvml_state("auto", str(tmp_path)) == f"auto: replay {tmp_path / 'nvml.json'}"


def _messages(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def _label_lines(path: Path) -> list[str]:
    """The ``key=value`` lines of a feature file: not the header, the expiry directive or
    the held-health comment (a failed GPU's, agent/heldstate.py)."""
    return [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]


def test_run_logs_startup_changes_and_file_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real agent on two real fixture roots: the start-up line, one change line per
    publish that changed labels, none for an unchanged pass, one line per file write."""
    caplog.set_level(logging.INFO)
    fd = tmp_path / "features.d"
    cfg = Config(
        root=str(fixture_root("hgx-h100")),
        outputs=("featurefile",),
        features_dir=str(fd),
        oneshot=True,
        udev=False,
        interval=30,
    )
    agent = Agent(cfg)
    assert agent.run() == 0
    lines = _messages(caplog, "nfd_gpu.agent")
    start = lines[0]
    assert start.startswith(f"nfd-gpu {__version__} starting: ")
    for part in (
        "outputs=featurefile",
        "profiles=neutral",
        f"root={fixture_root('hgx-h100')}",
        "nvml=",
        "oneshot",
        f"features={fd / 'nfd-gpu'}",
    ):
        assert part in start, (part, start)
    first = [m for m in lines if m.startswith("published ")]
    n = len(_label_lines(fd / "nfd-gpu"))
    assert first == [f"published {n} labels to featurefile: {n} added, 0 removed, 0 changed"]
    writes = _messages(caplog, "nfd_gpu.sinks.featurefile")
    assert len(writes) == 1 and writes[0].startswith(f"wrote feature file {fd / 'nfd-gpu'}")
    assert "(first write)" in writes[0] and f"{n} labels" in writes[0]

    # the publisher holds the published labels and features, not copies: a later pass must
    # not change them (checked below, after the GPU is lost)
    held = (agent.publisher._published, agent.publisher._published_features)
    held_then = copy.deepcopy(held)

    # Same labels again: the sink does not write, nothing is logged.
    caplog.clear()
    assert agent.run_pass()
    assert not _messages(caplog, "nfd_gpu.featurefile") and not [
        m for m in _messages(caplog, "nfd_gpu.agent") if m.startswith("published")
    ]
    assert not _messages(caplog, "nfd_gpu.sinks.featurefile")

    # A GPU lost: the labels change; one line says how.
    before = dict(line.split("=", 1) for line in _label_lines(fd / "nfd-gpu"))
    agent.cfg = Config(**{**cfg.__dict__, "root": str(fixture_root("h100-gpu-lost"))})
    caplog.clear()
    assert agent.run_pass()
    after = dict(line.split("=", 1) for line in _label_lines(fd / "nfd-gpu"))
    added, removed, changed = label_changes(before, after)
    assert (added, removed, changed) != (0, 0, 0)
    assert [m for m in _messages(caplog, "nfd_gpu.agent") if m.startswith("published")] == [
        f"published {len(after)} labels to featurefile: "
        f"{added} added, {removed} removed, {changed} changed, raw features changed"
    ]
    writes = _messages(caplog, "nfd_gpu.sinks.featurefile")
    assert len(writes) == 1 and "(content changed)" in writes[0]
    assert held == held_then


def test_debug_logs_each_pass(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """--log-level debug: every pass says what the scan found and whether it was held,
    also an unchanged pass (which logs nothing at info)."""
    caplog.set_level(logging.DEBUG)
    cfg = Config(
        root=str(fixture_root("hgx-h100")),
        outputs=("featurefile",),
        features_dir=str(tmp_path),
        oneshot=True,
        udev=False,
    )
    agent = Agent(cfg)
    assert agent.run_pass() and agent.run_pass()
    passes = [m for m in _messages(caplog, "nfd_gpu.agent") if m.startswith("pass ")]
    n = len((tmp_path / "nfd-gpu").read_text().splitlines()) - 2
    assert [p.split(":")[0] for p in passes] == ["pass 1", "pass 2"]
    for line in passes:
        assert f"GPUs nvidia=8, {n} labels, 0 warning(s)" in line, line
        assert line.endswith("every sink holds it"), line


def test_hook_output_is_deprecated(caplog: pytest.LogCaptureFixture) -> None:
    """NFD v0.17 stopped running hooks: ``--output hook`` still works, with a warning."""
    caplog.set_level(logging.WARNING)
    cfg = Config(root=str(fixture_root("hgx-h100")), outputs=("hook",), oneshot=True, udev=False)
    assert Agent(cfg).run() == 0
    (msg,) = [m for m in _messages(caplog, "nfd_gpu.agent") if "deprecated" in m]
    assert msg.startswith("--output hook is deprecated") and "NFD v0.17" in msg


def test_feature_file_expiry_refresh_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from nfd_gpu.sinks import Publication

    caplog.set_level(logging.INFO)
    now = [1_000_000.0]
    sink = FeatureFileSink(str(tmp_path), expiry=100, clock=lambda: now[0])
    pub = Publication({"a.example.com/x": "1"})
    assert sink.publish(pub)
    now[0] += 60  # past half the expiry: rewritten to refresh it
    assert sink.publish(pub)
    os.unlink(tmp_path / "nfd-gpu")
    assert sink.publish(pub)
    msgs = _messages(caplog, "nfd_gpu.sinks.featurefile")
    assert [m.split("(")[1].split(")")[0] for m in msgs] == [
        "first write",
        "expiry refresh",
        "restored: removed",
    ]


def test_label_changes_over_random_label_sets() -> None:
    import random

    rng = random.Random(7)
    keys = [f"k{i}" for i in range(12)]
    for _ in range(500):
        old = {k: rng.choice("ab") for k in rng.sample(keys, rng.randrange(13))}
        new = {k: rng.choice("ab") for k in rng.sample(keys, rng.randrange(13))}
        want = (
            sum(k not in old for k in new),
            sum(k not in new for k in old),
            sum(k in old and old[k] != v for k, v in new.items()),
        )
        assert label_changes(old, new) == want, (old, new)
    assert label_changes(None, {"a": "b"}) == (1, 0, 0)
