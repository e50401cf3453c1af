"""The ``health`` source: health signals every vendor's GPU has, from PCI sysfs.

* PCIe AER counters: ``aer_dev_fatal``, ``aer_dev_nonfatal``, ``aer_dev_correctable``.
  Each has one ``<error name> <count>`` line per error bit and a ``TOTAL_ERR_FATAL``,
  ``TOTAL_ERR_NONFATAL`` or ``TOTAL_ERR_COR`` line. Linux documents them in
  Documentation/ABI/testing/sysfs-bus-pci-devices-aer-stats, since 4.19.
* The fatal AER count of the GPU's upstream port, its ``aer_dev_fatal``: ``aer-fatal-port``.
  It is what the port above the GPU detected on the GPU's link, e.g. Surprise Down when
  the link went down. The kernel counts an error on the function that reported it. So a
  GPU that fell off its link shows it on the port, not on itself.
* The negotiated link width below what both ends support: ``PcieLink.lanes_lost``. Both
  ends are the GPU's and its upstream port's ``max_link_width``. The speed is not a
  fault: GPUs lower it when idle.
* A GPU with no driver bound, no ``driver`` link: ``no-driver``, neither ok nor failed.

Every count is parsed strictly by :func:`parse_count`: ASCII digits, at most 20 of them,
a 64-bit counter. A bad one is a warning naming the file, and the signal is not read.

The vendors' own signals are read by their sources: NVML, ``amd/ras.py``,
``intel/sysfs.py``. :mod:`nfd_gpu.health` judges them all.
"""

from __future__ import annotations

from nfd_gpu.discovery.pci import upstream_port
from nfd_gpu.discovery.pciaddr import PciAddress
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, HealthReason, Snapshot
from nfd_gpu.record import replace

AER_FILES: tuple[tuple[str, str, str], ...] = (
    ("aer_dev_fatal", "TOTAL_ERR_FATAL", "aer-fatal"),
    ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", "aer-nonfatal"),
    ("aer_dev_correctable", "TOTAL_ERR_COR", "aer-correctable"),
)
# the GPU's upstream port: its fatal count only (its other errors may be its own)
PORT_AER_FILES: tuple[tuple[str, str, str], ...] = (
    ("aer_dev_fatal", "TOTAL_ERR_FATAL", "aer-fatal-port"),
)


MAX_DIGITS = 20  # a 64-bit counter: 18446744073709551615


class BadCount(ValueError):
    """A count that is not 1 to MAX_DIGITS ASCII digits."""


def parse_count(text: str) -> int:
    """A kernel counter: ASCII digits only, at most :data:`MAX_DIGITS`; else BadCount."""
    t = text.strip()
    if not t or len(t) > MAX_DIGITS or not (t.isascii() and t.isdigit()):
        raise BadCount(f"not a count: {t[:24]!r}")
    return int(t)


def aer_total(text: str, total: str) -> int | None:
    """The ``TOTAL_...`` count of an AER stats file; None when it has none.

    BadCount when that line's count is not a count.
    """
    for line in text.splitlines():
        name, _, count = line.strip().partition(" ")
        if name == total:
            return parse_count(count)
    return None


def _aer_files(host: HostRoot, base: str) -> list[tuple[str, str, str]]:
    """File, total and reason of the GPU's own AER files and its upstream port's fatal one."""
    files = [(f"{base}/{name}", total, reason) for name, total, reason in AER_FILES]
    port = upstream_port(host, base)
    if port is not None:
        files += [(f"{port}/{name}", total, reason) for name, total, reason in PORT_AER_FILES]
    return files


def _aer(host: HostRoot, g: Gpu) -> Gpu:
    signals: list[str] = []
    faults: list[HealthReason] = []
    for rel, total, reason in _aer_files(host, f"sys/bus/pci/devices/{g.address}"):
        text = host.read_text(rel)
        try:
            n = aer_total(text, total) if text is not None else None
        except BadCount as exc:
            host.warn(f"/{rel}: {total}: {exc}")
            continue
        if n is None:
            continue
        signals.append("sysfs.aer")
        if n > 0:
            faults.append(HealthReason(reason, "sysfs", n))
    return replace(g, health=g.health.read(tuple(signals), tuple(faults)))


def _link(g: Gpu) -> Gpu:
    lk = g.link
    if lk is None or not lk.current_width or not lk.width:
        return g
    lost = lk.lanes_lost
    fault = (HealthReason("pcie-width", "sysfs", lost),) if lost > 0 else ()
    return replace(g, health=g.health.read(("sysfs.pcie-link",), fault))


NO_DRIVER = HealthReason("no-driver", "sysfs")


def _driver(g: Gpu) -> Gpu:
    """No driver bound to the GPU's PCI function: the state says so.

    - It is never ``ok``, never ``failed`` for it.
    - An integrated GPU that is no PCI function, such as Tegra, has no such link.
    """
    if g.driver is not None or PciAddress.parse(g.address) is None:
        return g
    return replace(g, health=g.health.read(("sysfs.driver",), (NO_DRIVER,)))


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus = tuple(_driver(_link(_aer(ctx.host, g))) for g in snap.gpus)
    return replace(snap, gpus=gpus)


SOURCE = Source("health", _discover)
