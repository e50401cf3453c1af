"""On the real host (``--root /``) the scanned PCI list equals ``/sys/bus/pci/devices``
and pyudev's enumeration, and the labels agree with an independent count."""

from __future__ import annotations

import os

import pytest

from nfd_gpu.scan import run_scan

SYS_PCI = "/sys/bus/pci/devices"

pytestmark = pytest.mark.skipif(not os.path.isdir(SYS_PCI), reason="no /sys/bus/pci on this host")


def test_pci_list_matches_sysfs_and_pyudev() -> None:
    import pyudev

    r = run_scan("/")
    scanned = [d.address for d in r.snapshot.pci]
    assert scanned == sorted(os.listdir(SYS_PCI))
    udev = sorted(d.sys_name for d in pyudev.Context().list_devices(subsystem="pci"))
    assert scanned == udev
    by_addr = {d.address: d for d in r.snapshot.pci}
    for d in pyudev.Context().list_devices(subsystem="pci"):
        ours = by_addr[d.sys_name]
        assert f"0x{ours.vendor}" == d.attributes.asstring("vendor")
        assert f"0x{ours.class_id}" == d.attributes.asstring("class")
        assert ours.driver == d.driver


def test_host_labels_match_independent_gpu_count() -> None:
    gpu_vendors = {"0x10de", "0x1002", "0x8086"}
    candidates = 0
    for name in os.listdir(SYS_PCI):
        base = os.path.join(SYS_PCI, name)
        with open(os.path.join(base, "vendor")) as f:
            vendor = f.read().strip()
        with open(os.path.join(base, "class")) as f:
            cls = f.read().strip()
        if (
            vendor in gpu_vendors
            and cls.startswith("0x03")
            and not os.path.exists(os.path.join(base, "physfn"))
        ):
            candidates += 1
    r = run_scan("/")
    neutral = {k: v for k, v in r.labels.items() if k.startswith("gpu.feature.node.kubernetes.io/")}
    if candidates == 0:
        assert len(r.snapshot.gpus) == 0 or all(
            g.class_id.startswith("12") for g in r.snapshot.gpus
        )
    if not r.snapshot.gpus:
        assert neutral == {}
    else:
        assert neutral["gpu.feature.node.kubernetes.io/count"] == str(len(r.snapshot.gpus))
