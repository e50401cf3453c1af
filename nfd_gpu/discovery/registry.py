"""The GPU vendors, and every discovery source in the order ``scan.discover`` runs them.

A vendor is a package with a ``VENDOR`` and one line in ``VENDORS``.
The ``VENDOR`` is a :class:`~nfd_gpu.discovery.source.Vendor`: PCI id, names, drivers,
modules, its own sources. docs/architecture.md has a worked example.

The order matters:

1. ``pci`` lists the functions.
2. ``gpus`` builds the GPU records from them.
3. The vendor sources refine those records.
   NVIDIA's also fills the driver versions that ``module-versions`` could not read.
4. ``driver-versions`` records each vendor's version from its ``Vendor.drivers``.
5. ``identify`` derives the families the tables lack, and warns about GPUs still unknown.
6. ``health`` reads the PCIe health signals.
7. ``vgpu`` and ``runtime`` read what the GPUs expose.
8. ``system`` reads the host around them.

The shared steps that must recognise the vendors' GPUs, drivers or modules are given the
vendors by PCI id.
"""

from __future__ import annotations

from collections.abc import Iterable

from nfd_gpu.discovery import amd, gpus, health, identify, intel, nvidia, pci, runtime, system, vgpu
from nfd_gpu.discovery.source import Source, Vendor

VENDORS: tuple[Vendor, ...] = (
    nvidia.VENDOR,
    amd.VENDOR,
    intel.VENDOR,
)


def by_pci_id(vendors: Iterable[Vendor]) -> dict[str, Vendor]:
    return {v.pci_id: v for v in vendors}


def sources(vendors: tuple[Vendor, ...]) -> tuple[Source, ...]:
    """Return every source, in order, for these vendors; their own come in the vendors' order."""
    ids = by_pci_id(vendors)
    return (
        pci.source(ids),
        gpus.source(ids),
        system.versions(ids),
        *(s for v in vendors for s in v.sources),
        system.vendor_versions(ids),
        identify.SOURCE,
        health.SOURCE,
        vgpu.SOURCE,
        runtime.source(ids),
        system.source(ids),
    )


SOURCES = sources(VENDORS)
