"""AMD GPUs: KFD topology and amdgpu sysfs, and the optional ``pyamdgpuinfo`` library.

* ``amdgpuinfo.py``: the ``amdgpuinfo`` source, marketing name and VRAM from libdrm.
* ``sysfs.py``: the ``amd`` source, KFD nodes, amdgpu attributes, partitions and XGMI.
* ``ras.py``: the ``amd-ras`` source, RAS error counts and bad VRAM pages, for health.
"""

from __future__ import annotations

from nfd_gpu.discovery.amd import amdgpuinfo, ras, sysfs
from nfd_gpu.discovery.source import Vendor

VENDOR = Vendor(
    name="amd",
    pci_id="1002",
    display="AMD",
    drivers=("amdgpu", "radeon"),
    modules=("amdgpu", "gim"),
    sources=(amdgpuinfo.SOURCE, sysfs.SOURCE, ras.SOURCE),
    sriov_host_drivers=("gim",),  # AMD MxGPU
    accelerators_are_gpus=True,  # vendor 1002 makes no other class-0x12 device
    dev_list=("kfd",),
    dev_needs=("kfd",),  # ROCm's compute interface beside the render node
)
