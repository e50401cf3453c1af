"""``run`` with a ``--root`` other than ``/`` never writes the host's features.d unless
told where to write: the scanned root is not this node, and nfd-worker would publish the
root's labels for it (``run --oneshot --root <fixture>`` used to, with a 1 h expiry)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nfd_gpu.config import loader as config
from tests.conftest import fixture_root, nfd_gpu_cmd

ROOT = str(fixture_root("hgx-h100"))
REFUSED = (
    f"configuration: root {ROOT!r} is not this host: say where the featurefile output "
    "writes (--features-dir or NFD_GPU_FEATURES_DIR; the default is the host's)"
)


@pytest.mark.parametrize("outputs", [None, "featurefile", "featurefile,nodefeature"])
def test_another_root_needs_a_feature_directory(outputs: str | None) -> None:
    flags = {"root": ROOT, "oneshot": True, "outputs": outputs, "node_name": "n", "namespace": "x"}
    with pytest.raises(config.ConfigError) as e:
        config.load(env={}, flags=flags)
    assert str(e.value) == REFUSED


def test_a_feature_directory_given_or_this_host_or_a_dry_run_is_accepted(tmp_path: Path) -> None:
    given = config.load(env={}, flags={"root": ROOT, "features_dir": str(tmp_path)})
    assert given.features_dir == str(tmp_path)
    by_env = config.load(env={"NFD_GPU_FEATURES_DIR": str(tmp_path)}, flags={"root": ROOT})
    assert by_env.features_dir == str(tmp_path)
    host = config.load(env={}, flags={"root": "/"})
    assert host.features_dir == "/etc/kubernetes/node-feature-discovery/features.d/"
    dry = config.load(env={}, flags={"root": ROOT, "dry_run": True})  # writes nothing
    assert dry.features_dir == host.features_dir
    other = config.load(env={}, flags={"root": ROOT, "outputs": "hook"})  # no feature file
    assert other.outputs == ("hook",)


def test_the_cli_says_so_in_one_line_and_writes_nothing(subprocess_env: dict[str, str]) -> None:
    with pytest.raises(config.ConfigError):  # first: never run the old behaviour for real
        config.load(env={}, flags={"root": ROOT, "oneshot": True})
    cmd = [*nfd_gpu_cmd(), "run", "--oneshot", "--root", ROOT]
    p = subprocess.run(cmd, env=subprocess_env, capture_output=True, text=True, check=False)
    assert p.returncode == 2
    assert p.stderr == f"nfd-gpu: error: {REFUSED}\n"
