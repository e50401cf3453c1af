"""Every rendering of deploy/ (kustomize overlays and component subsets, the Helm chart's
values matrix) starts on any kernel: no hostPath below /proc or /sys, where what exists is
the running kernel's configuration (/proc/modules only with module support), but for the
ones procfs creates on every kernel (/proc/driver: fs/proc/root.c's proc_root_init). An absent
typed path fails the kubelet's type check ("hostPath type check failed"); an absent untyped
one the container runtime's mkdir (procfs and sysfs refuse it): either way the pod never
starts. /proc and /sys themselves are on every Linux node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy import renderings
from tests.deploy.test_manifests import OVERLAYS, render

KERNEL_TREES = ("/proc", "/sys")
ALWAYS_THERE = ("/proc/driver",)


def _host_paths(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for o in objs:
        if o.get("kind") == "DaemonSet":
            for v in o["spec"]["template"]["spec"].get("volumes", []):
                if "hostPath" in v:
                    out.append((v["hostPath"]["path"], v["hostPath"].get("type", "")))
    assert out, "no DaemonSet with hostPath volumes"
    return out


def _check(objs: list[dict[str, Any]], where: str) -> None:
    for path, kind in _host_paths(objs):
        if path.rstrip("/") in ALWAYS_THERE:
            continue
        below = [t for t in KERNEL_TREES if path.rstrip("/").startswith(t + "/")]
        assert not below, f"{where}: hostPath {path} (type {kind!r}) is below {below[0]}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_mounts_nothing_a_kernel_may_lack(overlay: str) -> None:
    _check(render(overlay), f"deploy/overlays/{overlay}")


def test_component_subsets_mount_nothing_a_kernel_may_lack(tmp_path: Path) -> None:
    for i, sub in enumerate(renderings.SUBSETS):
        objs = renderings.render_subset(sub, tmp_path / str(i))
        _check(objs, "components: " + ("+".join(sub) or "base"))


@pytest.mark.parametrize("case", sorted(renderings.HELM_MATRIX))
def test_chart_mounts_nothing_a_kernel_may_lack(case: str, tmp_path: Path) -> None:
    objs = renderings.helm_template(renderings.HELM_MATRIX[case][0], tmp_path)
    _check(objs, f"deploy/helm/nfd-gpu ({case})")


def test_scan_copes_without_proc_modules(tmp_path: Path) -> None:
    """A kernel without module support has no /proc/modules: the scan is complete and quiet,
    the built-in GPU driver still found by /sys/module/<name> (the Talos capture, xe)."""
    import shutil

    from nfd_gpu.scan import run_scan
    from tests.conftest import fixture_root

    root = tmp_path / "root"
    shutil.copytree(fixture_root("talos-arc-xe"), root, symlinks=True)
    (root / "proc" / "modules").unlink()
    r = run_scan(root)
    assert r.complete and not r.warnings, (r.errors, r.warnings)
    flags = r.features["flags"]
    assert "xe" in flags["kernel.enabledmodule"]["elements"], flags.get("kernel.enabledmodule")
    assert not flags.get("kernel.loadedmodule", {}).get("elements")


def test_loaded_modules_without_proc_modules(tmp_path: Path) -> None:
    """Without /proc/modules (the pod's view), the loaded modules are those whose
    /sys/module/<name>/initstate is live; built-in ones (no initstate) are not loaded."""
    from nfd_gpu.discovery.system import loaded_modules
    from nfd_gpu.host import HostRoot

    for name, state in (
        ("nvidia", "live"),
        ("vfio_pci", "live\n"),
        ("gone", "going"),
        ("xe", None),
    ):
        d = tmp_path / "sys" / "module" / name
        d.mkdir(parents=True)
        if state is not None:
            (d / "initstate").write_text(state)
    assert loaded_modules(HostRoot(tmp_path)) == ("nvidia", "vfio_pci")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "modules").write_text("i915 4096 0 - Live 0x0\n")
    assert loaded_modules(HostRoot(tmp_path)) == ("i915",)
