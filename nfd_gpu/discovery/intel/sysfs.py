"""Intel depth: tiles, local memory and Xe Link from i915 and xe sysfs.

Sources: docs/amd-intel.md "Intel", and the kernel sources named below.

* Tiles: i915 lists one ``drm/card<N>/gt/gt<i>`` directory per tile.
  xe lists ``tile<i>`` directories under the PCI device.
  Intel's labeler counts ``card<N>/gt/gt*`` plus ``card<N>/device/tile?``, and 1 when there
  are none.
* Local memory, i915: ``drm/card<N>/lmem_total_bytes``, parsed with base 0.
  Intel's labeler multiplies it by the tile count, and so do we.
* Local memory, xe: ``tile<i>/physical_vram_size_bytes``, summed over tiles.
  The format is ``%llu``, from xe_tile_sysfs.c.
* Xe Link: an ``i915.iaf.<n>`` or legacy ``iaf.<n>`` directory below the PCI device,
  with an ``iaf_fabric_id`` attribute. IAF is Intel Accelerator Fabric.
  compute-runtime reads the same path.
* Family, product and the tiles fallback: ``nfd_gpu/data/intel.tsv``.

Everything is best effort: facts that cannot be read stay unknown.
"""

from __future__ import annotations

import re

from nfd_gpu.catalog import tables
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, HealthReason, IntelGpu, Snapshot
from nfd_gpu.record import replace

MIB = 1024 * 1024
INTEL_DRIVERS = ("i915", "xe")
_GT = re.compile(r"^gt[0-9]+$")
_TILE = re.compile(r"^tile[0-9]+$")
_IAF = re.compile(r"^(i915\.)?iaf\.[0-9]+$")


def parse_bytes(text: str | None) -> int | None:
    """Parse a byte count as sysfs prints it, decimal or ``0x`` hex; None when not one."""
    if not text:
        return None
    token = text.strip().split()[0] if text.strip() else ""
    try:
        value = int(token, 0)
    except ValueError:
        return None
    return value if value >= 0 else None


def count_matching(names: list[str], pattern: re.Pattern[str]) -> int:
    return sum(1 for n in names if pattern.match(n))


def _cards(g: Gpu) -> list[str]:
    return [n for n in g.drm if re.match(r"^card[0-9]+$", n)]


def enrich(host: HostRoot, gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    """Complete Intel GPUs from i915 or xe sysfs and the model table."""
    return tuple(_enrich_one(host, g) if g.vendor == "intel" else g for g in gpus)


def _enrich_one(host: HostRoot, g: Gpu) -> Gpu:
    dev = f"sys/bus/pci/devices/{g.address}"
    provenance = dict(g.provenance)
    entries = host.listdir(dev)

    xe_tiles = sorted((n for n in entries if _TILE.match(n)), key=lambda n: int(n[4:]))
    gt_tiles = 0
    lmem: int | None = None
    for card in _cards(g):
        gt_tiles = max(gt_tiles, count_matching(host.listdir(f"{dev}/drm/{card}/gt"), _GT))
        if lmem is None:
            lmem = parse_bytes(host.read_text(f"{dev}/drm/{card}/lmem_total_bytes"))

    tiles: int | None = None
    if xe_tiles or gt_tiles:
        tiles = len(xe_tiles) + gt_tiles
        provenance["tiles"] = "sysfs"
    elif g.driver in INTEL_DRIVERS and _cards(g):
        tiles = 1  # the driver shows no tile directories on single-tile parts
        provenance["tiles"] = "sysfs"
    else:
        info = tables.lookup("intel", g.device_id, g.revision)
        if info is not None and info.tiles:
            tiles = info.tiles
            provenance["tiles"] = "table"

    memory: int | None = None
    if xe_tiles:
        sizes = [
            parse_bytes(host.read_text(f"{dev}/{t}/physical_vram_size_bytes")) for t in xe_tiles
        ]
        known = [s for s in sizes if s]
        if known:
            memory = sum(known)
    if memory is None and lmem:
        memory = lmem * (tiles or 1)
    memory_mib = g.memory_mib
    if memory:
        memory_mib = memory // MIB
        provenance["memory_mib"] = "sysfs"

    interconnects = g.interconnects
    if any(_IAF.match(n) and host.exists(f"{dev}/{n}/iaf_fabric_id") for n in entries):
        interconnects = tuple(sorted({*g.interconnects, "xe-link"}))
        provenance["interconnects"] = "sysfs"

    return replace(
        g,
        memory_mib=memory_mib,
        interconnects=interconnects,
        intel=IntelGpu(tiles=tiles, local_memory_bytes=memory or None),
        provenance=provenance,
    )


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    return replace(snap, gpus=enrich(ctx.host, snap.gpus))


SOURCE = Source("intel", _discover, needs=("intel",))


def _survivability(host: HostRoot, g: Gpu) -> Gpu:
    """Tell whether xe's ``device/survivability_mode`` exists: the firmware needs a flash.

    - That is boot or runtime survivability: xe_survivability_mode.c, "Xe Boot Survivability".
    - i915 has no such attribute. No Intel health signal is read on i915.
    """
    if g.vendor != "intel" or g.driver != "xe":
        return g
    stuck = host.lexists(f"sys/bus/pci/devices/{g.address}/survivability_mode")
    fault = (HealthReason("survivability-mode", "sysfs"),) if stuck else ()
    return replace(g, health=g.health.read(("sysfs.survivability",), fault))


def _health(ctx: Context, snap: Snapshot) -> Snapshot:
    return replace(snap, gpus=tuple(_survivability(ctx.host, g) for g in snap.gpus))


HEALTH_SOURCE = Source("intel-health", _health, needs=("intel",))
