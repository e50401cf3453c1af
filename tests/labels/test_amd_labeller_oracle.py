"""Acceptance: the amd profile equals AMD's node labeller key for key on every fixture with
AMD GPUs, with the sample DaemonSet's flags (defaults + amd-beta, since the labeller always
writes the beta.amd.com copies), with its Helm chart's (no -product-name), with every flag
(every option but amd-mode and the amd-no-<kind> ones), and with each default kind's flag
left out (amd-no-<kind>). The labeller's output is derived from the fixture's files by
tests/labels/amd_labeller_oracle.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nfd_gpu.labels.options import AMD_KINDS, PROFILE_OPTIONS
from nfd_gpu.scan import run_scan
from nfd_gpu.snapshot import take_snapshot
from tests.conftest import ALL_FIXTURES, fixture_root
from tests.labels.amd_labeller_oracle import (
    ALL_FLAGS,
    DAEMONSET_FLAGS,
    HELM_FLAGS,
    labeller_output,
)

AMD_FIXTURES = [
    n
    for n in ALL_FIXTURES
    if any(g.vendor == "amd" for g in run_scan(fixture_root(n)).snapshot.gpus)
]
ALL_OPTIONS = tuple(
    o
    for o, (p, _) in PROFILE_OPTIONS.items()
    if p == "amd" and o != "amd-mode" and not o.startswith("amd-no-")
)
# The master-branch labeller exits without the amdgpu driver; nfd-gpu follows the
# gpu-virtualization branch's VF mode there (docs/migration.md).
VF_MODE = ["mi300x-sriov-host"]
# "broken" binds amdgpu without a sys/module/amdgpu tree (a damaged tree, no real host)
SKIPPED = [*VF_MODE, "broken"]


def test_fixture_partition() -> None:
    assert set(VF_MODE) < set(AMD_FIXTURES)
    assert {"mi210-8x", "mi300x-cpx-nps4", "mi300x-vf-guest", "mixed-nvidia-amd"} <= set(
        AMD_FIXTURES
    )
    for name in VF_MODE:
        assert labeller_output(fixture_root(name)) == {}


@pytest.mark.parametrize("name", [n for n in AMD_FIXTURES if n not in SKIPPED])
def test_daemonset_flags(name: str) -> None:
    root = fixture_root(name)
    ours = run_scan(root, profiles=("amd",), profile_options=("amd-beta",)).labels
    assert ours == labeller_output(root, DAEMONSET_FLAGS)


@pytest.mark.parametrize("name", [n for n in AMD_FIXTURES if n not in SKIPPED])
def test_every_flag(name: str) -> None:
    root = fixture_root(name)
    ours = run_scan(root, profiles=("amd",), profile_options=ALL_OPTIONS).labels
    assert ours == labeller_output(root, ALL_FLAGS)


@pytest.mark.parametrize("name", [n for n in AMD_FIXTURES if n not in SKIPPED])
def test_helm_chart_flags(name: str) -> None:
    root = fixture_root(name)
    opts = ("amd-beta", "amd-no-product-name")
    assert run_scan(root, profiles=("amd",), profile_options=opts).labels == labeller_output(
        root, HELM_FLAGS
    )


@pytest.mark.parametrize("kind", AMD_KINDS)
def test_each_default_kind_off(kind: str) -> None:
    """Every flag but one default kind's: amd-no-<kind> drops exactly what the flag adds,
    on every judged fixture (on some of them the kind is there to drop)."""
    dropped = 0
    for name in (n for n in AMD_FIXTURES if n not in SKIPPED):
        root = fixture_root(name)
        opts = (*ALL_OPTIONS, f"amd-no-{kind}")
        theirs = labeller_output(root, tuple(f for f in ALL_FLAGS if f != kind))
        assert run_scan(root, profiles=("amd",), profile_options=opts).labels == theirs, name
        dropped += theirs != labeller_output(root, ALL_FLAGS)
    assert dropped


# `srcversion` of a DKMS-built amdgpu.ko, as dkms printed it in
# https://github.com/ROCm/legacy-rocm-build/issues/344 ("Module version C502C9F63988A81945CAABD
# for amdgpu.ko"); no fixture's source lists one, so it is written into a copy
SRCVERSION = "C502C9F63988A81945CAABD"


def test_driver_src_version(tmp_path: Path) -> None:
    root = tmp_path / "mi210-8x"
    shutil.copytree(fixture_root("mi210-8x"), root, symlinks=True)
    opts = ("amd-beta", "amd-driver-src-version")
    flags = (*DAEMONSET_FLAGS, "driver-src-version")
    # no srcversion file (an in-tree module without one): the labeller writes an empty value
    theirs = labeller_output(root, flags)
    assert theirs["amd.com/gpu.driver-src-version"] == ""
    assert run_scan(root, profiles=("amd",), profile_options=opts).labels == theirs
    (root / "sys/module/amdgpu/srcversion").write_text(SRCVERSION + "\n")
    theirs = labeller_output(root, flags)
    assert theirs["amd.com/gpu.driver-src-version"] == SRCVERSION
    assert run_scan(root, profiles=("amd",), profile_options=opts).labels == theirs
    take_snapshot(tmp_path / "capture", root)  # a capture keeps the file
    assert run_scan(tmp_path / "capture", profiles=("amd",), profile_options=opts).labels == theirs


def test_cpx_counts() -> None:
    # KFD-backed kinds count the 64 partitions, sysfs/libdrm-backed kinds the 8 GPUs
    out = labeller_output(fixture_root("mi300x-cpx-nps4"))
    assert out["beta.amd.com/gpu.simd-count.152"] == "64"
    assert out["beta.amd.com/gpu.device-id.74a1"] == "8"
    assert out["beta.amd.com/gpu.family.AI"] == "8"
