"""The GPU vendors, and every discovery source in the order ``scan.discover`` runs them.

A vendor is a package with a ``VENDOR`` (:class:`~nfd_gpu.discovery.source.Vendor`: PCI id,
names, drivers, modules, its own sources) and one line in ``VENDORS``; docs/architecture.md
has a worked example.

The order matters: ``pci`` lists the functions, ``gpus`` builds the GPU records from them,
the vendor sources refine those records (NVIDIA's also fills the driver versions that
``module-versions`` could not read), ``driver-versions`` records each vendor's from its
``Vendor.drivers``, ``identify`` derives the families the tables lack and warns about GPUs
still unknown, ``health`` reads the PCIe health signals, ``vgpu`` and ``runtime`` read what
the GPUs expose, ``system`` reads the host around them. The shared steps that must
recognise the vendors' GPUs, drivers or modules are given the vendors by PCI id.
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
    """Every source, in order, for these vendors (their own sources in the vendors' order)."""
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
