"""The real H200 node (tests/fixtures/sysfs/h200-vm, from tests/data/captures/h200-vm).

nvidia-smi is the ground truth for values; the live label files are what nfd-gpu printed on
that machine with NVML. Labels this work adds on purpose: ``virtualization=passthrough``
(NVML virtualization mode PASSTHROUGH, nvidia-smi-q.txt "Virtualization Mode :
Pass-Through"). Every other live label is reproduced exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.scan import run_scan
from tests.conftest import DATA, REPO, fixture_root, nfd_gpu_cmd
from tests.fake_pynvml import library_env, write_fake_pynvml, write_unimportable

G = "gpu.feature.node.kubernetes.io"
CAPTURE = DATA / "captures" / "h200-vm"
# on purpose, labels added after the capture's labels were printed: virtualization; health
# (its recording answers no health call, so the signals read are the GPU answering NVML and
# its PCIe link, all clear)
ADDED = {f"{G}/virtualization": "passthrough", f"{G}/health": "ok"}
# Not knowable from procfs/sysfs on that machine (no MIG mode, no virtualization mode
# outside NVML): absent without NVML, never a different value.
# health: without NVML only the PCIe link is read, which says nothing of the GPU itself
NVML_ONLY = {f"{G}/mig.enabled", f"{G}/virtualization", f"{G}/health"}


def read_labels(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


def live(profile: str) -> dict[str, str]:
    labels = read_labels(CAPTURE / f"live-{profile}.labels")
    return {**labels, **ADDED} if profile == "neutral" else labels


def parse(stdout: str) -> dict[str, str]:
    return dict(line.partition("=")[::2] for line in stdout.splitlines() if line)


def cli(
    args: list[str], pythonpath: list[Path] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_GPU_")}
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in pythonpath or []), str(REPO)])
    for p in pythonpath or []:
        env = library_env(p, env)  # a fake pynvml's stand-in NVML library
    return subprocess.run(
        [*nfd_gpu_cmd(), *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def without_recording(tmp_path: Path) -> Path:
    root = tmp_path / "h200"
    shutil.copytree(fixture_root("h200-vm"), root, symlinks=True)
    (root / "nvml.json").unlink()
    return root


@pytest.mark.parametrize("profile", ["neutral", "nvidia"])
def test_replayed_capture_gives_the_live_labels(profile: str) -> None:
    r = run_scan(fixture_root("h200-vm"), profiles=(profile,))
    assert r.labels == live(profile)
    assert r.warnings == []


def test_recording_from_another_nvml_py_version_replays() -> None:
    """The capture's nvidia-ml-py declares clusterUuid as 80 bytes, ours 16 (or the other way
    round): values replay into whatever struct the library in use defines."""
    rec = json.loads((fixture_root("h200-vm") / "nvml.json").read_text())
    fabric = rec["devices"][0]["nvmlDeviceGetGpuFabricInfo"]
    assert len(fabric["clusterUuid"]) == 80  # as recorded on the H200
    assert run_scan(fixture_root("h200-vm")).labels[f"{G}/count"] == "1"
    # a fabric-attached GPU recorded with an 80-byte array: the UUID is the first 16 bytes
    uuid = list(range(1, 17))
    for size in (8, 16, 80, 128):
        raw = (uuid + [0] * size)[:size]
        fabric.update(clusterUuid=raw, state=3, status=0, cliqueId=7)
        from nfd_gpu.discovery.nvidia import nvml

        facts = nvml.query(nvml_replay.build(rec))
        assert facts is not None
        clique = facts.gpus[0].clique
        if size >= 16:
            assert clique == "01020304-0506-0708-090a-0b0c0d0e0f10.7"
        else:
            assert clique is None  # too short to be a UUID: no clique, no crash


def test_fake_pynvml_on_the_path_is_used_under_any_root(tmp_path: Path) -> None:
    """--nvml auto: no recording under the root, pynvml importable and answering -> NVML."""
    root = without_recording(tmp_path)
    fake = write_fake_pynvml(tmp_path / "lib", fixture_root("h200-vm") / "nvml.json")
    for profile in ("neutral", "nvidia"):
        p = cli(["scan", "--root", str(root), "-p", profile], [fake])
        assert p.returncode == 0, p.stderr
        assert parse(p.stdout) == live(profile)
        assert "warning" not in p.stderr
    off = cli(["scan", "--root", str(root), "--nvml", "off"], [fake])
    assert f"{G}/mig.enabled" not in parse(off.stdout)  # off: the library is never asked


def test_without_pynvml_no_label_changes_value(tmp_path: Path) -> None:
    root = without_recording(tmp_path)
    gone = write_unimportable(tmp_path / "nolib")
    for profile in ("neutral", "nvidia"):
        p = cli(["scan", "--root", str(root), "-p", profile], [gone])
        assert p.returncode == 0, p.stderr
        got, want = parse(p.stdout), live(profile)
        assert {k: v for k, v in got.items()} == {k: want[k] for k in got}
        assert set(want) - set(got) == (NVML_ONLY if profile == "neutral" else set())
    # the CUDA driver API version comes from the driver branch (580 -> 13.0) without NVML
    p = cli(["scan", "--root", str(root)], [gone])
    assert parse(p.stdout)[f"{G}/nvidia.cuda.major"] == "13"
    # --nvml on: NVML required, not there -> one line, exit 1
    p = cli(["scan", "--root", str(root), "--nvml", "on"], [gone])
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "nfd-gpu: error: NVML required (--nvml on) but not usable: "
        "nvmlInit failed or pynvml missing"
    ]
    p = cli(["scan", "--root", str(root), "--nvml", "maybe"], [gone])
    assert p.returncode == 2 and "expected auto, on or off" in p.stderr


def test_nvml_off_ignores_the_recording() -> None:
    on = run_scan(fixture_root("h200-vm")).labels
    off = run_scan(fixture_root("h200-vm"), nvml="off").labels
    assert f"{G}/mig.enabled" in on and f"{G}/mig.enabled" not in off
    assert {k: on[k] for k in off} == off


# --- MIG names: NVML's own names for five models ------------------------------------------

# Standard 7-compute-slice / 8-memory-slice GPUs: (GPU instance slices, memory eighths,
# suffix) of each GPU instance profile, from the MIG User Guide's profile tables (v580:
# A100 Table 6, H100 Table 7, H200 Table 8, B200 Table 9; tests/data/nvidia/
# mig_profiles.tsv). The 1g profile with double memory (1g.10gb on A100-40GB, 1g.20gb on
# H100) takes 2/8 of the memory (10 of 40 GB, 20 of 80 GB).
PROFILE_TABLE = ((1, 1, ""), (1, 1, "+me"), (1, 2, ""), (2, 2, ""), (3, 4, ""), (4, 4, ""),
                 (7, 8, ""))  # fmt: skip
# Total memory NVML reports (MiB) and NVML's names, from the MIG User Guide / mig_profiles.tsv;
# the H200 from the capture (mig-profiles.txt, nvidia-smi mig -lgip in host.txt).
MODELS = {
    "A100-SXM4-40GB": (40536, ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb",
                               "4g.20gb", "7g.40gb"]),
    "A100-SXM4-80GB": (81920, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb",
                               "4g.40gb", "7g.80gb"]),
    "H100-80GB": (81559, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb",
                          "4g.40gb", "7g.80gb"]),
    "H200-141GB": (150754820096 // 2**20, ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb",
                                           "3g.71gb", "4g.71gb", "7g.141gb"]),
    "B200-180GB": (183359, ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb",
                            "4g.90gb", "7g.180gb"]),
}  # fmt: skip


@pytest.mark.parametrize("model", sorted(MODELS))
def test_mig_names_from_the_profile_table(model: str) -> None:
    from nfd_gpu.discovery.nvidia.nvml import mig_memory_gb, profile_name

    total_mib, names = MODELS[model]
    total = total_mib * 2**20
    got = []
    for g, eighths, suffix in PROFILE_TABLE:
        # the largest memory size with this share: the name depends on the share only
        mem = eighths * total // 8 // 2**20
        got.append(profile_name(g, g, mig_memory_gb(mem, total), suffix))
    assert got == names


def test_mig_names_from_nvml_answers_on_the_h200() -> None:
    """NVML's own profile names and sizes (mig-profiles.txt) through the adapter's formula."""
    from nfd_gpu.discovery.nvidia.nvml import GI_PROFILES, mig_memory_gb, profile_name

    total = 150754820096
    seen = 0
    for line in (CAPTURE / "mig-profiles.txt").read_text().splitlines():
        if not line.startswith("profile ") or "{" not in line:
            continue
        enum = int(line.split()[1])
        info = eval_dict(line[line.index("{") :])
        slices, suffix = GI_PROFILES[enum]
        name = profile_name(slices, slices, mig_memory_gb(info["memorySizeMB"], total), suffix)
        assert "MIG " + name == info["name"]
        seen += 1
    assert seen == 7


def eval_dict(text: str) -> dict[str, object]:
    """The Python dict repr of mig-profiles.txt as JSON (quotes swapped; values are plain)."""
    data: dict[str, object] = json.loads(text.replace("'", '"'))
    return data


def test_mig_names_from_the_fixture_recordings() -> None:
    """A100-40GB and H100-80GB MIG devices recorded in fixtures, named by the adapter."""
    from nfd_gpu.discovery.nvidia import nvml

    for name, expect in (
        ("dgx-a100-mig-mixed", {"1g.5gb", "1g.5gb+me", "2g.10gb", "3g.20gb", "4g.20gb"}),
        ("h100-mig-single", {"1g.10gb"}),
    ):
        rec = json.loads((fixture_root(name) / "nvml.json").read_text())
        facts = nvml.query(nvml_replay.build(rec))
        assert facts is not None
        names = {p.profile.split(".", 1)[1] if "c." in p.profile[:3] else p.profile
                 for p in facts.partitions}  # fmt: skip
        assert expect <= names


def test_round_half_away_from_zero() -> None:
    from nfd_gpu.discovery.nvidia.nvml import round_half_away

    assert [round_half_away(n, 2) for n in (1, 3, 5, -1, -3)] == [1, 2, 3, -1, -2]
    assert round_half_away(4 * 141, 8) == 71  # Python's round(70.5) is 70


def test_snapshot_records_no_library_directories(tmp_path: Path) -> None:
    from nfd_gpu.capture import capture_host

    dest = tmp_path / "snap"
    capture_host(dest, fixture_root("max1550-xe"))
    manifest = json.loads((dest / "SNAPSHOT.json").read_text())
    usr = [p for p in manifest["links"] + manifest["markers"] + manifest["files"]
           if p.startswith("usr/lib")]  # fmt: skip
    assert usr == ["usr/lib/x86_64-linux-gnu/libze_loader.so.1"]
    assert run_scan(dest).labels[f"{G}/runtime.level-zero"] == "true"


def test_agent_with_nvml_on_does_not_publish_without_nvml(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--nvml on in the agent: a pass where NVML does not answer is not published."""
    from nfd_gpu.agent import Agent
    from nfd_gpu.config.loader import Config
    from nfd_gpu.sinks import Publication, Sink

    published: list[dict[str, str]] = []

    class Recorder(Sink):
        name = "test"

        def publish(self, pub: Publication) -> bool:
            published.append(dict(pub.labels))
            return True

    root = without_recording(tmp_path)
    agent = Agent(Config(root=str(root), nvml="on", oneshot=True), sinks=[Recorder()])
    assert agent.run_pass() is False
    assert published == []
    assert "NVML required (--nvml on) but not usable" in caplog.text
    agent = Agent(Config(root=str(root), nvml="auto", oneshot=True), sinks=[Recorder()])
    assert agent.run_pass() is True
    assert published and published[0][f"{G}/nvidia.cuda.major"] == "13"


def test_mig_profile_is_not_knowable_from_procfs() -> None:
    """docs/nvidia.md "MIG naming": profiles of one GPU share memory footprints on the
    real H200, so neither a GI id nor its memory placement could name the profile; without
    NVML the MIG devices of the MIG-enabled H200 fixture are counted, as `unknown`."""
    import ast
    import re

    by_memory: dict[int, set[str]] = {}
    for line in (CAPTURE / "mig-profiles.txt").read_text().splitlines():
        m = re.match(r"profile \d+ \[.*\] \(v3\): (\{.*\})$", line)
        if m:
            info = ast.literal_eval(m.group(1))
            by_memory.setdefault(info["memorySizeMB"], set()).add(info["name"])
    shared = {mb: names for mb, names in by_memory.items() if len(names) > 1}
    assert shared == {
        16384: {"MIG 1g.18gb", "MIG 1g.18gb+me"},
        33280: {"MIG 1g.35gb", "MIG 2g.35gb"},
        71424: {"MIG 3g.71gb", "MIG 4g.71gb"},
    }
    root = fixture_root("h200-mig-mixed")
    with_nvml = run_scan(root).labels
    assert {k: v for k, v in with_nvml.items() if k.startswith(f"{G}/mig.") and ".count" in k} == {
        f"{G}/mig.1g.18gb.count": "1",
        f"{G}/mig.1g.18gb.me.count": "1",
        f"{G}/mig.1g.35gb.count": "2",
        f"{G}/mig.2g.35gb.count": "1",
        f"{G}/mig.3g.71gb.count": "1",
        f"{G}/mig.4g.71gb.count": "1",
    }
    gis = sorted(p.name for p in root.glob("proc/driver/nvidia/capabilities/gpu*/mig/gi*"))
    assert gis == ["gi1", "gi1", "gi13", "gi14", "gi5", "gi5", "gi6"]
    without = run_scan(root, nvml="off")
    assert {p.profile for p in without.snapshot.partitions} == {"unknown"}
    mig = {k: v for k, v in without.labels.items() if k.startswith(f"{G}/mig.") and "count" in k}
    assert mig == {f"{G}/mig.unknown.count": "7"}
