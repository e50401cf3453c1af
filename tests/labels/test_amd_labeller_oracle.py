"""Acceptance: the amd profile equals AMD's node labeller key for key on every fixture with
AMD GPUs, with the sample DaemonSet's flags (defaults + amd-beta, since the labeller always
writes the beta.amd.com copies) and with every flag (every option but amd-mode). The
labeller's output is derived from the fixture's files by tests/labels/amd_labeller_oracle.py."""

from __future__ import annotations

import pytest

from nfd_gpu.labels.options import PROFILE_OPTIONS
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, fixture_root
from tests.labels.amd_labeller_oracle import ALL_FLAGS, DAEMONSET_FLAGS, labeller_output

AMD_FIXTURES = [
    n
    for n in ALL_FIXTURES
    if any(g.vendor == "amd" for g in run_scan(fixture_root(n)).snapshot.gpus)
]
ALL_OPTIONS = tuple(o for o, (p, _) in PROFILE_OPTIONS.items() if p == "amd" and o != "amd-mode")
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


def test_cpx_counts() -> None:
    # KFD-backed kinds count the 64 partitions, sysfs/libdrm-backed kinds the 8 GPUs
    out = labeller_output(fixture_root("mi300x-cpx-nps4"))
    assert out["beta.amd.com/gpu.simd-count.152"] == "64"
    assert out["beta.amd.com/gpu.device-id.74a1"] == "8"
    assert out["beta.amd.com/gpu.family.AI"] == "8"
