"""The ``health`` source: health signals every vendor's GPU has, from PCI sysfs.

* PCIe AER counters (``aer_dev_fatal``, ``aer_dev_nonfatal``, ``aer_dev_correctable``:
  one ``<error name> <count>`` line per error bit and a ``TOTAL_ERR_FATAL`` /
  ``TOTAL_ERR_NONFATAL`` / ``TOTAL_ERR_COR`` line; Linux
  Documentation/ABI/testing/sysfs-bus-pci-devices-aer-stats, since 4.19);
* the negotiated link width below what both ends support (``PcieLink``; the speed is
  not a fault: GPUs lower it when idle).

The vendors' own signals are read by their sources (NVML, ``amd/ras.py``,
``intel/sysfs.py``); :mod:`nfd_gpu.health` judges them all.
"""

from __future__ import annotations

import dataclasses

from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.hostroot import HostRoot
from nfd_gpu.model import Gpu, HealthReason, Snapshot

AER_FILES: tuple[tuple[str, str, str], ...] = (
    ("aer_dev_fatal", "TOTAL_ERR_FATAL", "aer-fatal"),
    ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", "aer-nonfatal"),
    ("aer_dev_correctable", "TOTAL_ERR_COR", "aer-correctable"),
)


def aer_total(text: str, total: str) -> int | None:
    """The ``TOTAL_...`` count of an AER stats file; None when it has none."""
    for line in text.splitlines():
        name, _, count = line.strip().partition(" ")
        if name == total and count.strip().isdigit():
            return int(count.strip())
    return None


def _aer(host: HostRoot, g: Gpu) -> Gpu:
    signals: list[str] = []
    faults: list[HealthReason] = []
    for name, total, reason in AER_FILES:
        text = host.read_text(f"sys/bus/pci/devices/{g.address}/{name}")
        n = aer_total(text, total) if text is not None else None
        if n is None:
            continue
        signals.append("sysfs.aer")
        if n > 0:
            faults.append(HealthReason(reason, "sysfs", n))
    return dataclasses.replace(g, health=g.health.read(tuple(signals), tuple(faults)))


def _link(g: Gpu) -> Gpu:
    lk = g.link
    if lk is None or not lk.current_width or not lk.max_width:
        return g
    narrow = lk.current_width < lk.max_width
    fault = (
        (HealthReason("pcie-width", "sysfs", lk.max_width - lk.current_width),) if narrow else ()
    )
    return dataclasses.replace(g, health=g.health.read(("sysfs.pcie-link",), fault))


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus = tuple(_link(_aer(ctx.host, g)) for g in snap.gpus)
    return dataclasses.replace(snap, gpus=gpus)


SOURCE = Source("health", _discover)
