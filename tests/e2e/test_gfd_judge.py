"""GFD's own code judges the nvidia profile: for every NVIDIA fixture × MIG strategy ×
sharing config, ``nfd-gpu scan --profile nvidia`` with the flags GFD was given must print
the labels GFD v0.19.0's labelers write (tests/e2e/gfd_judge.py; Jetsons: its tegra strategy
over a fake libcuda.so.1; ``gfd.timestamp``'s value is not compared, its presence is).
Fixtures whose NVIDIA GPUs are driver-bound but have no NVML recording are not judged: GFD
needs NVML answers (docs/migration.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from nfd_gpu.cli import app
from tests.conftest import ALL_FIXTURES, FIXTURES, fixture_root
from tests.e2e.gfd_judge import (
    REPEAT,
    closest,
    gfd_labels,
    models,
    repeats,
    version,
    without_timestamp,
)
from tests.e2e.oracle import SUMMARY

SHARING = sorted((FIXTURES.parent / "sharing").glob("*.yaml"))
STRATEGIES = ("none", "single", "mixed")
COUNTS = {"cases": 0, "same": 0, "keys": 0}
TEGRA_COUNTS = {"cases": 0, "same": 0, "keys": 0}  # the tegra strategy's cases, also in COUNTS


def _has_nvidia(root: Path) -> bool:
    devices = root / "sys" / "bus" / "pci" / "devices"
    vendors = (d / "vendor" for d in devices.iterdir()) if devices.is_dir() else ()
    return any(v.is_file() and v.read_text(errors="replace").strip() == "0x10de" for v in vendors)


def _bound_without_recording(root: Path) -> bool:
    """NVIDIA GPUs bound to the driver but no NVML answers recorded: GFD cannot be run."""
    drivers = (root / "sys/bus/pci/drivers/nvidia").glob("0000:*")
    return not (root / "nvml.json").exists() and any(True for _ in drivers)


# h200-vm is a capture by an nfd-gpu snapshot that did not save class, vendor, device or
# resource (GFD reads them): they are derived from what it holds (its CAPTURE.md).
# hyperv-p100-vm's recording has no system answers (nvmlSystemGetDriverVersion and
# nvmlSystemGetCudaDriverVersion, which a real NVML always gives): GFD fails on it
# ("error getting driver version: ERROR_NOT_SUPPORTED"); judged once its source gives them
# (the driver and CUDA versions of NVIDIA/nvidia-docker#1316's nvidia-smi header could not
# be read from any stored copy of that thread, and are not made up).
# real-k40m-aer-xid79 (wilicc/gpu-burn#1), real-rtx5080-xid79 (open-gpu-kernel-modules
# #1151) and real-a100-xid94 (wtdcode/vllm-backport#62): the listings show the driver but no
# CUDA version, so their recordings have no nvmlSystemGetCudaDriverVersion answer either, and
# GFD fails the same way.
UNJUDGED = {"hyperv-p100-vm", "real-a100-xid94", "real-k40m-aer-xid79", "real-rtx5080-xid79"}
JUDGED = [n for n in ALL_FIXTURES if _has_nvidia(fixture_root(n)) and n not in UNJUDGED
          and not _bound_without_recording(fixture_root(n))]  # fmt: skip


def ours(root: Path, args: list[str], rejected: bool) -> dict[str, str]:
    """``nfd-gpu scan --profile nvidia`` labels for ``root`` (``args``: nfd-gpu's flags).

    ``rejected``: GFD refused its configuration; nfd-gpu must refuse it too (exit 2)."""
    res = CliRunner().invoke(app, ["scan", "--root", str(root), "--profile", "nvidia", *args])
    if rejected and res.exit_code == 2:
        return {}
    assert res.exit_code == 0, res.output
    return dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)


def judge_case(
    root: Path,
    gfd_args: list[str],
    our_args: list[str],
    nvml: bool = True,
    repeat: int | None = None,
    counts: tuple[dict[str, int], ...] = (COUNTS,),
) -> None:
    verdict = gfd_labels(root, gfd_args, nvml, repeat)
    mine = ours(root, our_args, rejected="unable to load config" in verdict.error)
    same, keys, theirs = closest(mine, verdict)
    for count in counts:
        count["cases"] += 1
        count["same"] += same
        count["keys"] += keys
    mine, theirs = without_timestamp(mine), without_timestamp(theirs)
    diff = {k: (mine.get(k), theirs.get(k)) for k in sorted(set(mine) | set(theirs))
            if mine.get(k) != theirs.get(k)}  # fmt: skip
    assert not diff, f"nfd-gpu vs GFD ({verdict.error or 'labels'}): {diff}"


def _flags(strategy: str, sharing: Path | None) -> tuple[list[str], list[str]]:
    gfd = [f"--mig-strategy={strategy}", *([f"--config-file={sharing}"] if sharing else [])]
    mine = ["--mig-strategy", strategy, *(["--sharing-config", str(sharing)] if sharing else [])]
    return gfd, mine


@pytest.mark.parametrize("sharing", [None, *SHARING], ids=lambda p: p.stem if p else "no-config")
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", JUDGED)
def test_gfd_judges_fixture(name: str, strategy: str, sharing: Path | None) -> None:
    gfd, mine = _flags(strategy, sharing)
    judge_case(fixture_root(name), gfd, mine)


# GFD's map order matters only between GPU names (gfd_judge.repeats): with one name,
# REPEAT runs give one output, on MIG-enabled, sharing and vGPU nodes too; with two, more
ONE_NAME = [("real-v100-aws", "none", None), ("h200-mig-mixed", "mixed", None),
            ("dgx-a100-mig-mixed", "single", None), ("nvidia-vgpu-guest", "none", None),
            ("h100-mig-single", "single", SHARING[0])]  # fmt: skip


@pytest.mark.parametrize(("name", "strategy", "sharing"), ONE_NAME)
def test_one_gpu_name_one_gfd_output(name: str, strategy: str, sharing: Path | None) -> None:
    root = fixture_root(name)
    assert models(root) == 1
    gfd, _ = _flags(strategy, sharing)
    assert len(gfd_labels(root, gfd, repeat=REPEAT).outputs) == 1


def test_two_gpu_names_are_repeated() -> None:
    root = fixture_root("a100-t4")
    assert models(root) == 2 and repeats(root) == REPEAT
    assert len(gfd_labels(root, ["--mig-strategy=none"]).outputs) > 1


REJECTED = sorted((FIXTURES.parent / "sharing-rejected").glob("*.yaml"))


@pytest.mark.parametrize("config", REJECTED, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", JUDGED)
def test_gfd_judges_rejected_config(name: str, config: Path) -> None:
    # GFD refuses the file and writes nothing; nfd-gpu's scan refuses it (exit 2)
    judge_case(fixture_root(name), [f"--config-file={config}"], ["--sharing-config", str(config)])


def _copy(tmp_path: Path, name: str, **recording: object) -> tuple[Path, dict[str, Any]]:
    root = tmp_path / name
    shutil.copytree(fixture_root(name), root, symlinks=True)
    rec = {**json.loads((root / "nvml.json").read_text()), **recording}
    (root / "nvml.json").write_text(json.dumps(rec))
    return root, rec


GFD_FLAGS = """version: v1
flags:
  migStrategy: {strategy}
  failOnInitError: {fail}
  deviceDiscoveryStrategy: nvml
  gfd:
    noTimestamp: true
    sleepInterval: 30s
    oneshot: true
"""


@pytest.mark.parametrize("fail", ["true", "false"])
@pytest.mark.parametrize("error", ["DriverNotLoaded", "LibRmVersionMismatch"])
def test_gfd_judges_init_failure(tmp_path: Path, error: str, fail: str) -> None:
    # NVML present but nvmlInit fails: GFD writes nothing (failOnInitError, its default)
    # or, with failOnInitError false, gfd.timestamp and the vGPU labels only
    root, _ = _copy(tmp_path, "nvidia-vgpu-guest", nvmlInit={"error": error})
    cfg = tmp_path / "gfd.yaml"
    cfg.write_text(GFD_FLAGS.format(strategy="none", fail=fail))
    judge_case(root, [f"--config-file={cfg}"], ["--sharing-config", str(cfg)])
    judge_case(root, [], [])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", JUDGED)
def test_gfd_judges_config_file_flags(tmp_path: Path, name: str, strategy: str) -> None:
    # GFD's own flags in its config file: migStrategy, failOnInitError,
    # deviceDiscoveryStrategy and flags.gfd.* (the rest change no label)
    cfg = tmp_path / "gfd.yaml"
    cfg.write_text(GFD_FLAGS.format(strategy=strategy, fail="false"))
    judge_case(fixture_root(name), [f"--config-file={cfg}"], ["--sharing-config", str(cfg)])


def test_gfd_judges_dgx_display(tmp_path: Path) -> None:
    # A DGX Station's display GPU (NVML name "NVIDIA DGX Display"): go-nvlib skips it, so
    # GFD counts and labels only the A100 (a100-t4 with the T4 answering as that GPU)
    root, rec = _copy(tmp_path, "a100-t4")
    devices = rec["devices"]
    next(d for d in devices if "T4" in d["nvmlDeviceGetName"])["nvmlDeviceGetName"] = (
        "NVIDIA DGX Display"
    )
    (root / "nvml.json").write_text(json.dumps(rec))
    judge_case(root, [], [])
    assert ours(root, [], False)["nvidia.com/gpu.count"] == "1"


# Every NVIDIA fixture: the vfio strategy needs no NVML answers
NVIDIA = [n for n in ALL_FIXTURES if _has_nvidia(fixture_root(n))]


def _with_vfio(tmp_path: Path, sharing: Path | None) -> Path:
    """A GFD config file: ``sharing`` (or nothing) with flags.deviceDiscoveryStrategy vfio."""
    doc = yaml.safe_load(sharing.read_text()) if sharing else {"version": "v1"}
    doc.setdefault("flags", {})["deviceDiscoveryStrategy"] = "vfio"
    cfg = tmp_path / "vfio.yaml"
    cfg.write_text(json.dumps(doc))
    return cfg


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", NVIDIA)
def test_gfd_judges_vfio_strategy(tmp_path: Path, name: str, strategy: str) -> None:
    # GFD's vfio strategy: the GPUs bound to vfio-pci (passthrough-host), named from
    # pci.ids; elsewhere only the vGPU labels, or nothing where GFD's PCI listing fails
    cfg = _with_vfio(tmp_path, None)
    gfd, mine = _flags(strategy, cfg)
    judge_case(fixture_root(name), gfd, mine, repeat=1)


@pytest.mark.parametrize("sharing", SHARING, ids=lambda p: p.stem)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gfd_judges_vfio_sharing(tmp_path: Path, strategy: str, sharing: Path) -> None:
    cfg = _with_vfio(tmp_path, sharing)
    gfd, mine = _flags(strategy, cfg)
    judge_case(fixture_root("passthrough-host"), gfd, mine, repeat=1)


# The BARs of an A100 SXM4 40GB (10de:20b0) as the kernel logged them in a public
# listing (triton-inference-server/server#4154): reg 0x10 [mem 0x42000000-0x42ffffff],
# 0x14 [mem 0x3000000000-0x3fffffffff 64bit pref], 0x1c [mem 0x4000000000-0x4001ffffff
# 64bit pref]; the flags are the kernel's for such windows (IORESOURCE_MEM, _PREFETCH,
# _MEM_64 with the BAR's type bits).
A100_BARS = (
    (0x42000000, 0x42FFFFFF, 0x40200),
    (0x3000000000, 0x3FFFFFFFFF, 0x14220C),
    (0, 0, 0),
    (0x4000000000, 0x4001FFFFFF, 0x14220C),
)


def test_gfd_judges_vfio_bar_memory(tmp_path: Path) -> None:
    # passthrough-host with those A100s: gpu.memory is the 64-bit BARs' sum rounded up to
    # a power of two, in bytes (64 GiB + 32 MiB -> 128 GiB), the product their pci.ids name
    root = tmp_path / "passthrough-host"
    shutil.copytree(fixture_root("passthrough-host"), root, symlinks=True)
    lines = [f"0x{a:016x} 0x{b:016x} 0x{f:016x}" for a, b, f in A100_BARS]
    lines += ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 9
    for dev in (root / "sys/bus/pci/drivers/vfio-pci").glob("0000:*"):
        (dev / "device").write_text("0x20b0\n")
        uevent = (dev / "uevent").read_text()
        (dev / "uevent").write_text(uevent.replace("20B5", "20B0"))
        (dev / "resource").write_text("\n".join(lines) + "\n")
    cfg = _with_vfio(tmp_path, None)
    judge_case(root, [f"--config-file={cfg}"], ["--sharing-config", str(cfg)], repeat=1)
    labels = ours(root, ["--sharing-config", str(cfg)], False)
    assert labels["nvidia.com/gpu.memory"] == str(128 << 30)
    assert labels["nvidia.com/gpu.product"] == "GA100-A100-SXM4-40GB"


def _add_vfio_gpu(root: Path, address: str, bars: tuple[tuple[int, int, int], ...]) -> None:
    """A copy of passthrough-host's 0000:41:00.0 (A100 PCIe 80GB on vfio-pci) at
    ``address``, its own root bus, with ``bars`` as its ``resource``."""
    bus = f"pci{address.rsplit(':', 1)[0]}"
    dst = root / "sys/devices" / bus / address
    shutil.copytree(root / "sys/devices/pci0000:41/0000:41:00.0", dst, symlinks=True)
    (root / "sys/bus/pci/devices" / address).symlink_to(f"../../../devices/{bus}/{address}")
    (root / "sys/bus/pci/drivers/vfio-pci" / address).symlink_to(
        f"../../../../devices/{bus}/{address}"
    )
    (dst / "uevent").write_text((dst / "uevent").read_text().replace("0000:41:00.0", address))
    lines = [f"0x{a:016x} 0x{b:016x} 0x{f:016x}" for a, b, f in bars]
    (dst / "resource").write_text("\n".join(lines) + "\n")


def test_gfd_judges_vfio_domain_order(tmp_path: Path) -> None:
    # go-nvlib orders GPUs by the address read as one hex number: VMD's 5-digit domain
    # 10000 after 2000 (a string sort puts it first). GFD's gpu.memory is its last GPU's
    root = tmp_path / "passthrough-host"
    shutil.copytree(fixture_root("passthrough-host"), root, symlinks=True)
    half = ((0x42000000, 0x42FFFFFF, 0x40200), (0x3000000000, 0x37FFFFFFFF, 0x14220C))
    _add_vfio_gpu(root, "10000:01:00.0", half)
    _add_vfio_gpu(root, "2000:01:00.0", A100_BARS)
    cfg = _with_vfio(tmp_path, None)
    judge_case(root, [f"--config-file={cfg}"], ["--sharing-config", str(cfg)], repeat=1)
    labels = ours(root, ["--sharing-config", str(cfg)], False)
    assert labels["nvidia.com/gpu.memory"] == str(32 << 30)


def test_gfd_judges_vfio_variant_driver(tmp_path: Path) -> None:
    # real-gb200-vfio's GB200s are on Grace's VFIO variant driver nvgrace_gpu_vfio_pci: a
    # passthrough GPU for the neutral mode, but GFD's vfio strategy lists only GPUs whose
    # driver is exactly vfio-pci (internal/resource/sysfs-lib.go:56, v0.19.0 and main
    # 1b826ac). One of them rebound to vfio-pci: GFD labels that one alone
    root = tmp_path / "real-gb200-vfio"
    shutil.copytree(fixture_root("real-gb200-vfio"), root, symlinks=True)
    addr = "0008:01:00.0"
    dev = root / "sys/devices/pci0008:01" / addr
    (dev / "driver").unlink()
    (root / "sys/bus/pci/drivers/vfio-pci").mkdir(parents=True)
    (dev / "driver").symlink_to("../../../bus/pci/drivers/vfio-pci")
    (root / "sys/bus/pci/drivers/vfio-pci" / addr).symlink_to(
        f"../../../../devices/pci0008:01/{addr}"
    )
    (root / "sys/bus/pci/drivers/nvgrace_gpu_vfio_pci" / addr).unlink()
    uevent = (dev / "uevent").read_text()
    (dev / "uevent").write_text(uevent.replace("DRIVER=nvgrace_gpu_vfio_pci", "DRIVER=vfio-pci"))
    cfg = _with_vfio(tmp_path, None)
    for host in (fixture_root("real-gb200-vfio"), root):
        judge_case(host, [f"--config-file={cfg}"], ["--sharing-config", str(cfg)], repeat=1)
    labels = ours(root, ["--sharing-config", str(cfg)], False)
    assert labels["nvidia.com/gpu.count"] == "1"
    assert labels["nvidia.com/gpu.product"] == "GB100-HGX-GB200"  # its pci.ids name
    assert "nvidia.com/gpu.count" not in ours(
        fixture_root("real-gb200-vfio"), ["--sharing-config", str(cfg)], False
    )


@pytest.mark.parametrize("name", NVIDIA)
def test_gfd_judges_a_capture_as_the_host(tmp_path: Path, name: str) -> None:
    # `nfd-gpu snapshot` keeps what GFD's nvpci reads (capture.PEER_PCI_FILES,
    # GFD_PCI_FILES): on the capture GFD's vfio strategy answers as on the host. Before,
    # GFD's device list failed on a capture with a Mellanox NIC (no numa_node) and found
    # no vfio-pci GPU (no driver link: a scan reads the driver from uevent)
    from nfd_gpu.capture import capture_host

    capture_host(tmp_path / "capture", fixture_root(name))
    args = [f"--config-file={_with_vfio(tmp_path, None)}"]
    host = gfd_labels(fixture_root(name), args, repeat=1)
    capture = gfd_labels(tmp_path / "capture", args, repeat=1)
    assert capture.error == host.error
    assert [without_timestamp(o) for o in capture.outputs] == [
        without_timestamp(o) for o in host.outputs
    ]


# Jetsons (tests/fixtures/specs/tegra.py): GFD's tegra strategy over the fixture's CUDA
# recording (a fake libcuda.so.1 answers it), and auto on a Tegra host
TEGRA_CUDA = [n for n in ALL_FIXTURES if (fixture_root(n) / "cuda.json").exists()]
TEGRA_RELEASE = [n for n in ALL_FIXTURES if (fixture_root(n) / "etc/nv_tegra_release").exists()]


def _with_discovery(tmp_path: Path, sharing: Path | None, discovery: str, fail: bool) -> Path:
    doc = yaml.safe_load(sharing.read_text()) if sharing else {"version": "v1"}
    doc.setdefault("flags", {}).update(deviceDiscoveryStrategy=discovery, failOnInitError=fail)
    cfg = tmp_path / f"{discovery}.yaml"
    cfg.write_text(json.dumps(doc))
    return cfg


@pytest.mark.parametrize("sharing", [None, *SHARING], ids=lambda p: p.stem if p else "no-config")
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", TEGRA_CUDA)
def test_gfd_judges_tegra_strategy(
    tmp_path: Path, name: str, strategy: str, sharing: Path | None
) -> None:
    cfg = _with_discovery(tmp_path, sharing, "tegra", True)
    gfd, mine = _flags(strategy, cfg)
    judge_case(fixture_root(name), gfd, mine, repeat=1, counts=(COUNTS, TEGRA_COUNTS))
    assert ours(fixture_root(name), mine, False)["nvidia.com/gpu.count"] == "1"


@pytest.mark.parametrize("fail", [True, False])
@pytest.mark.parametrize("name", [*TEGRA_CUDA, *TEGRA_RELEASE])
def test_gfd_judges_tegra_auto(tmp_path: Path, name: str, fail: bool) -> None:
    # auto: tegra where /etc/nv_tegra_release is (go-nvlib HasTegraFiles) and NVML is
    # absent; a fixture whose listing shows no release file gets one written here (L4T's
    # line format, the release of tests/fixtures/sysfs/real-jetson-thor's)
    root = tmp_path / name
    shutil.copytree(fixture_root(name), root, symlinks=True)
    release = root / "etc/nv_tegra_release"
    if not release.exists():
        release.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture_root("real-jetson-thor") / "etc/nv_tegra_release", release)
    cfg = _with_discovery(tmp_path, None, "auto", fail)
    counts = (COUNTS, TEGRA_COUNTS)
    judge_case(root, [f"--config-file={cfg}"], ["--sharing-config", str(cfg)], repeat=1,
               counts=counts)  # fmt: skip
    labels = ours(root, ["--sharing-config", str(cfg)], False)
    if (root / "cuda.json").exists():  # CUDA answers: labelled as with tegra
        assert labels["nvidia.com/gpu.count"] == "1"
    else:  # no libcuda: GFD's init fails (no labels, or only the vGPU labeler's)
        assert without_timestamp(labels) == ({} if fail else {"nvidia.com/vgpu.present": "false"})


def test_gfd_judged_count() -> None:
    """Runs after the cases above (file order): the count, printed at the end of the run."""
    if COUNTS["cases"] == 0:
        pytest.skip("no GFD case ran")
    SUMMARY.append(
        f"GFD-judged keys identical: {COUNTS['same']}/{COUNTS['keys']} "
        f"({COUNTS['cases']} cases, GFD {version()}'s labelers)"
    )
    if TEGRA_COUNTS["cases"]:
        SUMMARY.append(
            f"GFD-judged keys identical, tegra strategy: {TEGRA_COUNTS['same']}/"
            f"{TEGRA_COUNTS['keys']} ({TEGRA_COUNTS['cases']} Jetson cases)"
        )
    assert COUNTS["same"] == COUNTS["keys"]
