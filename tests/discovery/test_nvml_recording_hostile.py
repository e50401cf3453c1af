"""A hostile ``<root>/nvml.json``: read through HostRoot (bounded, non-blocking),
validated; a bad recording is a warning and procfs facts, never a crash.

Each case runs ``nfd-gpu scan`` in its own process: < 5 s, < 200 MB peak RSS, exit 0, no
traceback, the labels of the same root without a recording.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nfd_gpu.discovery.nvidia import nvml
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from tests.conftest import REPO, fixture_root, no_nvml_dir
from tests.memory import run_cli_with_peak

G = "gpu.feature.node.kubernetes.io"


def _write(text: str | bytes) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        p.write_bytes(text.encode() if isinstance(text, str) else text)

    return make


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _dev_zero(p: Path) -> None:
    p.symlink_to("/dev/zero")


def _gigabyte(p: Path) -> None:
    with open(p, "wb") as f:
        f.truncate(2**30)  # sparse: 1 GB of NULs to read


def _wrong_types(p: Path) -> None:
    rec = json.loads((fixture_root("h200-vm") / "nvml.json").read_text())
    rec["devices"][0]["nvmlDeviceGetMemoryInfo"]["total"] = "a lot"
    p.write_text(json.dumps(rec))


CASES: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "dev-zero": _dev_zero,
    "1-gb": _gigabyte,
    "list": _write("[1]"),
    "wrong-types": _wrong_types,
    "string-count": _write('{"devices": "many"}'),
    "nested-200000": _write("[" * 200_000 + "]" * 200_000),
    "not-utf8": _write(b"\xff\xfe{}"),
    "empty": _write(""),
}


@pytest.fixture(scope="module")
def procfs_labels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("plain") / "h200"
    shutil.copytree(fixture_root("h200-vm"), root, symlinks=True)
    (root / "nvml.json").unlink()
    return _scan(root)[0]


def _scan(root: Path) -> tuple[dict[str, str], str, float, float]:
    """Labels, stderr, seconds and peak RSS (MiB) of one ``nfd-gpu scan`` process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_GPU_")}
    env["PYTHONPATH"] = os.pathsep.join([str(no_nvml_dir()), str(REPO)])
    env["NFD_GPU_NVML"] = "auto"
    t0 = time.monotonic()
    p, peak = run_cli_with_peak(["scan", "--root", str(root)], env=env)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    labels = dict(line.partition("=")[::2] for line in p.stdout.splitlines())
    return labels, p.stderr, took, peak / 2**20


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_recording_is_a_warning_and_procfs_facts(
    case: str, tmp_path: Path, procfs_labels: dict[str, str]
) -> None:
    root = tmp_path / "h200"
    shutil.copytree(fixture_root("h200-vm"), root, symlinks=True)
    (root / "nvml.json").unlink()
    CASES[case](root / "nvml.json")
    labels, stderr, took, peak_mb = _scan(root)
    assert labels == procfs_labels
    assert "nvml.json" in stderr  # a warning names the file
    assert took < 5
    assert peak_mb < 200


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=30,
)
KEYS = st.sampled_from(
    [*nvml_replay.DEVICE_FUNCTIONS, "nvmlDeviceGetGpuFabricInfo", "migDevices",
     "gpuInstanceProfiles", "computeInstanceProfiles", "gpuInstances", "error"]
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    device=st.dictionaries(KEYS, JSON, max_size=6),
    top=st.dictionaries(
        st.sampled_from(["nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion"]), JSON
    ),
)
def test_any_recording_replays_or_is_rejected(device: dict[str, object], top: dict) -> None:  # type: ignore[type-arg]
    """Random values under the known names: rejected with RecordingError, or replayed
    without any other exception."""
    rec = {**top, "devices": [device]}
    try:
        lib = nvml_replay.loads(json.dumps(rec).encode())
    except nvml_replay.RecordingError:
        return
    nvml.query(lib)


def test_huge_mig_device_count_is_bounded() -> None:
    rec = json.loads((fixture_root("h100-mig-single") / "nvml.json").read_text())
    rec["devices"][0]["nvmlDeviceGetMaxMigDeviceCount"] = 2**63
    t0 = time.monotonic()
    facts = nvml.query(nvml_replay.loads(json.dumps(rec).encode()))
    assert facts is not None and time.monotonic() - t0 < 5
    assert len([p for p in facts.partitions if p.parent == facts.gpus[0].address]) <= 64
    rec["devices"][0]["nvmlDeviceGetMemoryInfo"]["total"] = -1
    with pytest.raises(nvml_replay.RecordingError, match="total"):
        nvml_replay.loads(json.dumps(rec).encode())
