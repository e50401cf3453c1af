"""Intel GPUs: tiles, local memory and Xe Link from i915 or xe sysfs, in ``sysfs.py``."""

from __future__ import annotations

from nfd_gpu.discovery.intel import sysfs
from nfd_gpu.discovery.source import Vendor

VENDOR = Vendor(
    name="intel",
    pci_id="8086",
    display="Intel",
    drivers=("i915", "xe"),
    modules=("i915", "xe"),
    sources=(sysfs.SOURCE, sysfs.HEALTH_SOURCE),
)
