"""The intel profile against Intel's own NodeFeatureRules, evaluated by nfd-gpu's engine
on each fixture's features (tests/data/intel/, copied from Intel's deployments/nfd)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, TESTS, fixture_root

RULES = TESTS / "data" / "intel"
# Keys Intel's rules write; memory.max / tiles come from Intel's labeler binary instead.
RULE_KEYS = ("gpu.intel.com/device", "gpu.intel.com/product", "gpu.intel.com/family")
GPU_LABEL = "intel.feature.node.kubernetes.io/gpu"


def _rule_labels(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    result = run_scan(root, profiles=("intel",))
    out: dict[str, str] = {}
    for name in ("platform-labeling-rules.yaml", "node-feature-rules.yaml"):
        out.update(evaluate(load_rules(RULES / name), result.features).labels)
    mine = {k: v for k, v in out.items() if k.startswith(RULE_KEYS) or k == GPU_LABEL}
    ours = {k: v for k, v in result.labels.items() if k.startswith(RULE_KEYS) or k == GPU_LABEL}
    return mine, ours


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_profile_matches_intels_rules(name: str) -> None:
    expected, ours = _rule_labels(fixture_root(name))
    if not any(g.vendor == "intel" for g in run_scan(fixture_root(name)).snapshot.gpus):
        assert ours == {}
        return
    assert ours == expected


def test_flex_vfs_are_counted_as_intel_does() -> None:
    expected, ours = _rule_labels(fixture_root("flex170-sriov"))
    assert ours["gpu.intel.com/device-id.0380-56c0.count"] == "9"  # PF + 8 VFs
    assert ours["gpu.intel.com/device.count"] == "9"
    assert ours == expected


def test_builtin_driver_counts_as_enabled(tmp_path: Path) -> None:
    # Talos-like: i915 built in, no proc/modules line; modules.builtin lists it and
    # sys/module/i915 exists. Intel's rule accepts kernel.enabledmodule.
    root = tmp_path / "root"
    shutil.copytree(fixture_root("arc-a770"), root, symlinks=True)
    mods = root / "proc" / "modules"
    mods.write_text("".join(x for x in mods.read_text().splitlines(True) if "i915" not in x))
    (root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.12.5-talos\n")
    builtin = root / "lib/modules/6.12.5-talos/modules.builtin"
    builtin.parent.mkdir(parents=True)
    builtin.write_text("kernel/drivers/gpu/drm/i915/i915.ko\nkernel/fs/ext4/ext4.ko\n")
    (root / "sys/module/i915/parameters").mkdir(parents=True)
    (root / "sys/module/i915/parameters/enable_guc").write_text("-1\n")
    r = run_scan(root, profiles=("intel",))
    assert "i915" not in r.snapshot.loaded_modules
    assert set(r.snapshot.builtin_modules) >= {"i915", "ext4"}
    assert "i915" in r.features["flags"]["kernel.enabledmodule"]["elements"]
    expected, ours = _rule_labels(root)
    assert ours[GPU_LABEL] == "true" == expected[GPU_LABEL]
    assert ours == expected
    # without modules.builtin: the sys/module directory alone tells it is built in
    builtin.unlink()
    assert "i915" in run_scan(root, profiles=("intel",)).snapshot.builtin_modules


def test_talos_fixture_builtin_xe() -> None:
    r = run_scan(fixture_root("talos-arc-xe"), profiles=("intel",))
    assert "xe" not in r.snapshot.loaded_modules
    assert "xe" in r.snapshot.builtin_modules
    expected, ours = _rule_labels(fixture_root("talos-arc-xe"))
    assert ours[GPU_LABEL] == expected[GPU_LABEL] == "true"
