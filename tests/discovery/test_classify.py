"""Counting rules (``nfd_gpu/discovery/gpus.py``): what is and is not a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from nfd_gpu.discovery.gpus import classify, gpu_mode, is_gpu_function
from nfd_gpu.discovery.passthrough import is_passthrough_driver, is_vfio_driver
from nfd_gpu.discovery.registry import VENDORS, by_pci_id
from nfd_gpu.model import PciDevice

GPU_VENDORS = by_pci_id(VENDORS)  # PCI vendor id -> vendor, as registry.sources builds it


def dev(vendor: str, device: str, cls: str, **kw: object) -> PciDevice:
    return PciDevice(
        address=str(kw.pop("address", "0000:01:00.0")),
        class_id=cls,
        vendor=vendor,
        device=device,
        **kw,
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("vendor", "device", "cls", "is_gpu"),
    [
        ("10de", "2330", "030200", True),  # H100 3D controller
        ("10de", "2684", "030000", True),  # RTX 4090 VGA
        ("1002", "740f", "120000", True),  # MI210 processing accelerator
        ("1002", "74a1", "120000", True),  # MI300X
        ("8086", "56c0", "038000", True),  # Flex 170 display controller
        ("8086", "a780", "030000", True),  # UHD 770 iGPU
        ("8086", "7d1d", "120000", False),  # Meteor Lake NPU: accelerator class, not a GPU
        ("10de", "22a3", "068000", False),  # NVSwitch bridge
        ("10de", "22ba", "040300", False),  # GPU HDMI audio
        ("1a03", "2000", "030000", False),  # ASPEED BMC VGA
        ("102b", "0536", "030000", False),  # Matrox server VGA
        ("1234", "1111", "030000", False),  # QEMU VGA
        ("1af4", "1050", "030000", False),  # virtio-gpu
        ("1013", "00b8", "030000", False),  # Cirrus
        ("15ad", "0405", "030000", False),  # VMware SVGA
        ("15b3", "101d", "020000", False),  # NIC
    ],
)
def test_counting_rules(vendor: str, device: str, cls: str, is_gpu: bool) -> None:
    assert is_gpu_function(dev(vendor, device, cls), GPU_VENDORS) is is_gpu


def test_host_vfs_are_vfs_not_gpus() -> None:
    pf = dev(
        "8086",
        "56c0",
        "038000",
        address="0000:4d:00.0",
        sriov_totalvfs=31,
        sriov_numvfs=1,
        virtfns=("0000:4d:00.1",),
    )
    vf = dev("8086", "56c0", "038000", address="0000:4d:00.1", physfn="0000:4d:00.0")
    switch = dev("10de", "22a3", "068000", address="0000:05:00.0")
    gpus, vfs, switches = classify([pf, vf, switch], GPU_VENDORS)
    assert gpus == [pf] and vfs == [vf] and switches == ["0000:05:00.0"]


def test_guest_vf_without_physfn_is_the_gpu() -> None:
    vf = dev("1002", "74b5", "120000")  # MI300X VF inside a VM
    gpus, vfs, _ = classify([vf], GPU_VENDORS)
    assert gpus == [vf] and vfs == []


@pytest.mark.parametrize(
    ("vendor", "driver", "numvfs", "vf_drivers", "mode"),
    [
        ("10de", "nvidia", None, (), "container"),
        ("1002", "amdgpu", 0, (), "container"),
        ("10de", "vfio-pci", None, (), "pf-passthrough"),
        ("1002", "gim", 4, ("vfio-pci",), "vf-passthrough"),
        ("8086", "i915", 8, ("vfio-pci",), "vf-passthrough"),
        ("8086", "i915", 8, ("i915",), "container"),
        ("8086", None, None, (), None),
        ("8086", "amdgpu", None, (), None),  # another vendor's driver gives no mode
    ],
)
def test_mode(
    vendor: str,
    driver: str | None,
    numvfs: int | None,
    vf_drivers: tuple[str, ...],
    mode: str | None,
) -> None:
    assert gpu_mode(GPU_VENDORS[vendor], driver, numvfs, vf_drivers) == mode


@pytest.mark.parametrize(
    ("driver", "vfio", "passthrough"),
    [
        ("vfio-pci", True, True),
        ("nvgrace_gpu_vfio_pci", True, True),  # Grace Hopper / Grace Blackwell GPU
        ("mlx5_vfio_pci", True, True),
        ("hisi_acc_vfio_pci", True, True),
        ("pds_vfio_pci", True, True),
        ("virtio_vfio_pci", True, True),
        ("xe_vfio_pci", True, True),
        ("pci-stub", False, True),  # no VFIO group
        ("nvidia", False, False),
        ("nvidia_vgpu_vfio", False, False),  # an mdev driver, not a PCI one
        ("vfio", False, False),
        ("vfio_pci", False, False),  # the module's name; the driver calls itself vfio-pci
        (None, False, False),
    ],
)
def test_passthrough_driver_rule(driver: str | None, vfio: bool, passthrough: bool) -> None:
    assert is_vfio_driver(driver) is vfio
    assert is_passthrough_driver(driver) is passthrough


@pytest.mark.parametrize("driver", ["vfio-pci", "nvgrace_gpu_vfio_pci", "pci-stub"])
def test_mode_of_every_passthrough_driver(driver: str) -> None:
    # a Grace superchip's GPU on nvgrace_gpu_vfio_pci is passed through like one on vfio-pci
    nvidia = GPU_VENDORS["10de"]
    assert gpu_mode(nvidia, driver, None, ()) == "pf-passthrough"
    assert gpu_mode(GPU_VENDORS["8086"], "i915", 4, (driver,)) == "vf-passthrough"


class _CountingList(list):  # type: ignore[type-arg]
    """A list that counts the passes made over it."""

    passes = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _CountingList.passes += 1
        return super().__iter__()


def test_vfs_are_matched_to_their_pfs_in_one_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """16 SR-IOV PFs with 8 VFs each: the VF list is indexed a fixed number of times, not
    once per GPU (an O(GPUs x VFs) step on hosts with hundreds of VFs), and each GPU gets
    exactly its own VFs, in scan order."""
    from nfd_gpu.discovery import gpus
    from nfd_gpu.discovery.source import Context
    from nfd_gpu.host import HostRoot
    from nfd_gpu.model import Snapshot

    pfs = [
        dev("1002", "74a1", "120000", address=f"0000:{b:02x}:00.0", sriov_totalvfs=8)
        for b in range(16)
    ]
    vfs = [
        dev("1002", "74b5", "120000", address=f"0000:{b:02x}:00.{f}", physfn=pf.address)
        for b, pf in enumerate(pfs)
        for f in range(1, 8)
    ]
    real = gpus.classify

    def counting(pci, vendors):  # type: ignore[no-untyped-def]
        g, v, s = real(pci, vendors)
        return g, _CountingList(v), s

    monkeypatch.setattr(gpus, "classify", counting)
    _CountingList.passes = 0
    ctx = Context(host=HostRoot(str(tmp_path)))
    before = Snapshot(root=str(tmp_path), pci=tuple(pfs + vfs))
    snap = gpus.source(GPU_VENDORS).discover(ctx, before)
    assert _CountingList.passes <= 3
    assert len(snap.gpus) == 16
    for pf, g in zip(pfs, snap.gpus, strict=True):
        assert g.vfs == tuple(v.address for v in vfs if v.physfn == pf.address)
