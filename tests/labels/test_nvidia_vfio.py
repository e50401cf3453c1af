"""The nvidia profile's vfio strategy (GFD's ``deviceDiscoveryStrategy: vfio``): GPUs bound
to vfio-pci labelled from PCI. GFD's own code judges the same cases in
tests/e2e/test_gfd_judge.py (root only); these run everywhere."""

from __future__ import annotations

import shutil
from pathlib import Path

from nfd_gpu.labels.nvidia import NvidiaOptions, nvidia_labels
from nfd_gpu.labels.nvidia_vfio import UNKNOWN_DEVICE, bar_memory, pci_name, vfio_gpus
from nfd_gpu.model import PciDevice, Snapshot
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

NV = "nvidia.com"
VFIO = NvidiaOptions(discovery="vfio")


def test_passthrough_host_labelled_from_pci() -> None:
    scan = run_scan(fixture_root("passthrough-host"), profiles=["nvidia"], nvidia_options=VFIO)
    labels = scan.labels
    # the figures: pci.ids "GA100 [A100 PCIe 80GB]" sanitised, 4 GPUs
    assert labels[f"{NV}/gpu.product"] == "GA100-A100-PCIe-80GB"
    assert labels[f"{NV}/gpu.count"] == "4"
    assert labels[f"{NV}/gpu.mode"] == "compute"
    assert labels[f"{NV}/mig.capable"] == "false"
    assert labels[f"{NV}/gpu.family"] == "undefined"
    assert labels[f"{NV}/cuda.driver-version.full"] == "unknown.unknown.unknown"
    assert labels[f"{NV}/cuda.runtime-version.full"] == "0.0"
    # compute capability -1 is no valid label value: dropped with a warning (NFD drops it)
    assert f"{NV}/gpu.compute.major" not in labels
    assert any("gpu.compute.major" in w for w in scan.warnings)
    # the fixture's BARs are all zero: no memory label
    assert f"{NV}/gpu.memory" not in labels
    # the default strategy (auto) sees no NVML GPU there: nothing, as GFD
    assert not run_scan(fixture_root("passthrough-host"), profiles=["nvidia"]).labels


def test_driver_bound_gpus_are_not_vfio_gpus() -> None:
    labels = run_scan(fixture_root("hgx-h100"), profiles=["nvidia"], nvidia_options=VFIO).labels
    assert not any(k.startswith(f"{NV}/gpu.") for k in labels)


def test_damaged_listing_gives_no_label(tmp_path: Path) -> None:
    root = tmp_path / "r"
    shutil.copytree(fixture_root("passthrough-host"), root, symlinks=True)
    # class and uevent (where nfd-gpu reads the ids first) damaged: go-nvlib's listing fails
    dev = root / "sys/bus/pci/devices/0000:41:00.0"
    (dev / "class").write_bytes(b"\xff\xfe\n")
    (dev / "uevent").write_text("garbage\n")
    scan = run_scan(root, profiles=["nvidia"], nvidia_options=VFIO)
    assert not scan.labels
    assert any("vfio strategy" in w for w in scan.warnings)


def test_bar_memory() -> None:
    dev = PciDevice("0000:41:00.0", "030200", "10de", "20b5")
    assert bar_memory(dev) == 0
    # 16 MiB 32-bit, 128 GiB + 32 MiB 64-bit prefetchable: the 64-bit sum rounded up
    bars = ((0, 16 << 20, 0x40200), (1, 128 << 30, 0x14220C), (3, 32 << 20, 0x14220C))
    assert bar_memory(PciDevice("0000:41:00.0", "030200", "10de", "20b5", bars=bars)) == 256 << 30


def test_pci_name() -> None:
    assert pci_name("20b5") == "GA100 [A100 PCIe 80GB]"
    assert pci_name("0000") == UNKNOWN_DEVICE


def test_gpus_in_go_nvlib_address_order() -> None:
    # go-nvlib sorts by the address read as one hex number: a 5-digit domain (VMD's
    # 10000:) after 2000:, though it sorts first as a string. GFD keeps the last GPU of a
    # name, so gpu.memory is that of 10000:01:00.0 (judged in tests/e2e/test_gfd_judge.py)
    def gpu(address: str, bar: int) -> PciDevice:
        bars = ((1, bar, 0x14220C),)
        return PciDevice(address, "030200", "10de", "20b5", driver="vfio-pci", bars=bars)

    snap = Snapshot(root="/", pci=(gpu("10000:01:00.0", 64 << 30), gpu("2000:01:00.0", 128 << 30)))
    gpus, _ = vfio_gpus(snap)
    assert [g.address for g in gpus] == ["2000:01:00.0", "10000:01:00.0"]
    assert nvidia_labels(snap, VFIO)[f"{NV}/gpu.memory"] == str(64 << 30)
