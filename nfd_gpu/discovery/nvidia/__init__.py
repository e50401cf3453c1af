"""NVIDIA GPUs: driver facts from procfs and NVML, NVML recording and replay, vGPU guests.

* ``procfs.py``: facts without a library, from ``proc/driver/nvidia``, ``sys/module``, ``dev``.
* ``nvml.py``: the NVML adapter, the only module that imports ``pynvml``.
* ``session.py``: which NVML a scan asks, by ``--nvml``; the agent's state between passes.
* ``replay.py`` and ``record.py``: NVML answers replayed from and recorded into ``nvml.json``.
* ``facts.py``: the shape procfs and NVML both return.
* ``driver.py``: the ``nvidia`` source, those facts merged into the GPU records.
* ``vgpu.py``: the ``nvidia-vgpu`` source, the PCI vendor capability of vGPU guests.
* ``tegra.py`` and ``cuda.py``: the ``nvidia-tegra`` source, the integrated GPU of a Jetson.
  It reads the device tree, the platform device, the L4T release and CUDA's answers.
"""

from __future__ import annotations

from nfd_gpu.discovery.nvidia import driver, tegra, vgpu
from nfd_gpu.discovery.source import Vendor

VENDOR = Vendor(
    name="nvidia",
    pci_id="10de",
    display="NVIDIA",
    drivers=("nvidia", "nouveau", "nvgpu"),
    modules=("nvidia",),
    # nvidia-tegra first: it adds the integrated GPU the others then see
    sources=(tegra.SOURCE, driver.SOURCE, vgpu.SOURCE),
    # nvidia-modprobe makes dev/nvidiactl and dev/nvidia<N> with mknod (no sysfs trace);
    # containers do not use the DRM render node
    dev_list=("nvidia",),
    dev_needs=("nvidiactl",),
    dev_per_gpu="nvidia",
    render_node=False,
    dev_in_sysfs=False,
)
