"""Every discovery source, in the order ``scan.discover`` runs them.

The order matters: ``pci`` lists the functions, ``gpus`` builds the GPU records from them,
the vendor sources refine those records (NVIDIA's also fills the driver versions that
``module-versions`` could not read), ``vgpu`` and ``runtime`` read what the GPUs expose,
``system`` reads the host around them. A new vendor is one module with a ``SOURCE`` and
one line here (docs/architecture.md).
"""

from __future__ import annotations

from nfd_gpu.discovery import gpus, pci, runtime, system, vgpu
from nfd_gpu.discovery.amd import amdgpuinfo
from nfd_gpu.discovery.amd import sysfs as amd
from nfd_gpu.discovery.intel import sysfs as intel
from nfd_gpu.discovery.nvidia import driver as nvidia
from nfd_gpu.discovery.nvidia import vgpu as nvidia_vgpu
from nfd_gpu.discovery.source import Source

SOURCES: tuple[Source, ...] = (
    pci.SOURCE,
    gpus.SOURCE,
    system.VERSIONS,
    nvidia.SOURCE,
    nvidia_vgpu.SOURCE,
    amdgpuinfo.SOURCE,
    amd.SOURCE,
    intel.SOURCE,
    vgpu.SOURCE,
    runtime.SOURCE,
    system.SOURCE,
)
