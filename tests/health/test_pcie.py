"""PCIe labels say what a link can do, never what an idle link does: GPUs train their
link down to 2.5 GT/s when idle and back up under load (NVIDIA/open-gpu-kernel-modules
#731: link gen 1 at P8, 3 at P0 of a gen 4 GPU; #1010: "PCIe link dropping to Gen1
(2.5 GT/s) while idle ... under load the link immediately retrains to Gen5"). ``pcie.gen``
/ ``pcie.width`` are the lower of the GPU's and its upstream port's maximum
(``max_link_speed`` / ``max_link_width``: the Link Capabilities, drivers/pci/pci-sysfs.c);
``degraded`` is a link narrower than both ends support (docs/health.md "PCIe link")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nfd_gpu.agent import Agent
from nfd_gpu.config import loader as config
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"
GPU = "0000:18:00.0"
DEV = f"sys/devices/pci0000:18/{GPU}"
PORT = "0000:17:01.0"


def _copy(tmp_path: Path, name: str = "hgx-h100") -> Path:
    root = tmp_path / "root"
    shutil.copytree(fixture_root(name), root, symlinks=True)
    return root


def _pcie(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(f"{G}/pcie.")}


def test_real_idle_laptop_link_is_not_degraded() -> None:
    """The real GTX 1660 Ti listing (inxi: gen 1 x16 of gen 3 x16, idle): main said
    ``pcie.gen=1`` and ``pcie.degraded=true``."""
    labels = run_scan(fixture_root("real-laptop-cml-1660ti")).labels
    assert _pcie(labels) == {f"{G}/pcie.gen": "3", f"{G}/pcie.width": "16"}


def test_an_idling_link_never_changes_a_label(tmp_path: Path) -> None:
    """The link goes 32 -> 2.5 -> 32 GT/s between passes: labels and health stay."""
    root = _copy(tmp_path)
    agent = Agent(config.load(env={}, flags={"root": str(root), "udev": False, "outputs": "hook"}))
    seen = []
    for speed in ("32.0 GT/s PCIe", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "2.5 GT/s PCIe"):
        (root / DEV / "current_link_speed").write_text(speed + "\n")
        seen.append(agent.scan().labels)
    assert all(s == seen[0] for s in seen), [_pcie(s) for s in seen]
    assert _pcie(seen[0])[f"{G}/pcie.gen"] == "5"


def _behind_port(root: Path, port_speed: str, port_width: int) -> None:
    """Put GPU 0000:18:00.0 under the fixture's bridge 0000:17:01.0 (as sysfs nests a
    function under its upstream port), the port's maximum set."""
    old = root / DEV
    port = root / "sys/devices/pci0000:17" / PORT
    new = port / GPU
    os.rename(old, new)
    for p in new.rglob("*"):  # relative links out of the device: one level deeper now
        if p.is_symlink() and not os.readlink(p).startswith("/"):
            was = os.path.join(old, os.path.relpath(p.parent, new), os.readlink(p))
            target = os.path.normpath(was)
            if not target.startswith(str(old)):
                p.unlink()
                p.symlink_to(os.path.relpath(target, p.parent))
    (port / "max_link_speed").write_text(port_speed + "\n")
    (port / "max_link_width").write_text(f"{port_width}\n")
    link = root / "sys/bus/pci/devices" / GPU
    link.unlink()
    link.symlink_to(f"../../../devices/pci0000:17/{PORT}/{GPU}")


def test_a_narrower_port_is_what_the_link_can_do(tmp_path: Path) -> None:
    """An x16 GPU in an x8 Gen4 slot trains to x8 at 16 GT/s: no loss (main: degraded)."""
    root = _copy(tmp_path)
    _behind_port(root, "16.0 GT/s PCIe", 8)
    (root / "sys/bus/pci/devices" / GPU / "current_link_width").write_text("8\n")
    res = run_scan(root)
    assert _pcie(res.labels) == {f"{G}/pcie.gen": "4", f"{G}/pcie.width": "8"}
    g = next(g for g in res.snapshot.gpus if g.address == GPU)
    assert "pcie-width" not in {r.reason for r in g.health.reasons}


def test_lanes_lost_below_both_ends_is_degraded(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _behind_port(root, "32.0 GT/s PCIe", 16)
    (root / "sys/bus/pci/devices" / GPU / "current_link_width").write_text("4\n")
    res = run_scan(root)
    assert _pcie(res.labels)[f"{G}/pcie.degraded"] == "true"
    assert _pcie(res.labels)[f"{G}/pcie.width"] == "16"  # what it can do, not what it did
    g = next(g for g in res.snapshot.gpus if g.address == GPU)
    lost = [r for r in g.health.reasons if r.reason == "pcie-width"]
    assert [(r.value, r.severity) for r in lost] == [(12, "degraded")]


def test_link_width_is_parsed_strictly() -> None:
    from nfd_gpu.discovery.pci import parse_link_width

    assert parse_link_width("16\n") == 16
    for bad in ("\u0661\u0666", "1" * 5000, "x16", "", "255", "0"):
        assert parse_link_width(bad) is None, bad
