"""The GPU vendors, and every discovery source in the order ``scan.discover`` runs them.

A vendor is a package with a ``VENDOR`` (:class:`~nfd_gpu.discovery.source.Vendor`: PCI id,
names, drivers, its own sources) and one line in ``VENDORS``; docs/architecture.md has a
worked example.

The order matters: ``pci`` lists the functions, ``gpus`` builds the GPU records from them,
the vendor sources refine those records (NVIDIA's also fills the driver versions that
``module-versions`` could not read), ``vgpu`` and ``runtime`` read what the GPUs expose,
``system`` reads the host around them. The shared steps that must recognise the vendors'
GPUs, drivers or modules are given ``GPU_VENDORS``.
"""

from __future__ import annotations

from nfd_gpu.discovery import amd, gpus, intel, nvidia, pci, runtime, system, vgpu
from nfd_gpu.discovery.source import Source, Vendor

VENDORS: tuple[Vendor, ...] = (
    nvidia.VENDOR,
    amd.VENDOR,
    intel.VENDOR,
)

GPU_VENDORS: dict[str, Vendor] = {v.pci_id: v for v in VENDORS}  # PCI vendor id -> vendor

SOURCES: tuple[Source, ...] = (
    pci.source(GPU_VENDORS),
    gpus.source(GPU_VENDORS),
    system.versions(GPU_VENDORS),
    *(s for v in VENDORS for s in v.sources),
    vgpu.SOURCE,
    runtime.SOURCE,
    system.source(GPU_VENDORS),
)
