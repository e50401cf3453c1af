"""PCI attribute parsers and the uevent/attribute-file fallbacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nfd_gpu.discovery import pci
from nfd_gpu.hostroot import HostRoot
from tests.conftest import fixture_root


@pytest.mark.parametrize(
    ("text", "gen"),
    [
        ("2.5 GT/s", 1),
        ("5 GT/s", 2),
        ("8 GT/s", 3),
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s PCIe", 2),
        ("8.0 GT/s PCIe", 3),
        ("16.0 GT/s PCIe", 4),
        ("16 GT/s", 4),
        ("32.0 GT/s PCIe", 5),
        ("64.0 GT/s PCIe", 6),
        ("Unknown", None),
        ("Unknown speed", None),
        ("", None),
        (None, None),
        ("7 GT/s", None),
    ],
)
def test_link_speed_both_kernel_formats(text: str | None, gen: int | None) -> None:
    assert pci.parse_link_speed(text) == gen


@pytest.mark.parametrize(
    ("text", "width"), [("16", 16), ("1", 1), ("0", None), ("255", None), ("x", None), ("", None)]
)
def test_link_width(text: str, width: int | None) -> None:
    assert pci.parse_link_width(text) == width


@pytest.mark.parametrize(
    ("text", "digits", "out"),
    [
        ("0x10de", 4, "10de"),
        ("0x10DE\n", 4, "10de"),
        ("10de", 4, "10de"),
        ("0x030200", 6, "030200"),
        ("0x30200", 6, "030200"),
        ("0x1", 2, "01"),
        ("0x12345", 4, None),
        ("zz", 4, None),
        ("", 4, None),
    ],
)
def test_hex_ids(text: str, digits: int, out: str | None) -> None:
    assert pci.parse_hex_id(text, digits) == out


def test_fixture_device_fields() -> None:
    devs = {d.address: d for d in pci.discover(HostRoot(fixture_root("hgx-h100")))}
    gpu = devs["0000:18:00.0"]
    assert (gpu.vendor, gpu.device, gpu.class_id) == ("10de", "2330", "030200")
    assert (gpu.subsystem_vendor, gpu.subsystem_device, gpu.revision) == ("10de", "16c1", "a1")
    assert gpu.driver == "nvidia" and gpu.numa_node == 0 and gpu.iommu_group == "20"
    assert gpu.link is not None and (gpu.link.current_gen, gpu.link.current_width) == (5, 16)
    nic = devs["0000:1b:00.0"]
    assert nic.sriov_totalvfs == 8 and nic.sriov_numvfs == 4
    assert nic.virtfns == ("0000:1b:00.2", "0000:1b:00.3", "0000:1b:00.4", "0000:1b:00.5")
    assert devs["0000:1b:00.3"].physfn == "0000:1b:00.0"
    bmc = devs["0000:02:00.0"]
    assert bmc.vendor == "1a03" and bmc.driver == "ast"


def test_drm_nodes_and_old_link_format() -> None:
    devs = {d.address: d for d in pci.discover(HostRoot(fixture_root("workstation-rtx4090")))}
    assert devs["0000:01:00.0"].drm == ("card1", "renderD129")
    link = devs["0000:01:00.0"].link
    assert link is not None and link.current_gen == 4  # "16 GT/s"


def test_attribute_files_used_without_uevent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    uevent = root / "sys/devices/pci0000:18/0000:18:00.0/uevent"
    uevent.unlink()
    host = HostRoot(root)
    dev = pci.read_device(host, "0000:18:00.0")
    assert dev is not None
    assert (dev.vendor, dev.device, dev.class_id, dev.driver) == (
        "10de",
        "2330",
        "030200",
        "nvidia",
    )
    assert host.warnings == []


def test_degraded_link() -> None:
    from nfd_gpu.model import PcieLink

    assert PcieLink(3, 8, 4, 16).degraded
    assert PcieLink(4, 8, 4, 16).degraded
    assert not PcieLink(4, 16, 4, 16).degraded
    assert not PcieLink(None, None, 4, 16).degraded
