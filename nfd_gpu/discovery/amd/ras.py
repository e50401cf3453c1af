"""The ``amd-ras`` source: amdgpu's RAS error counts and retired VRAM pages, from sysfs.

Formats: Linux Documentation/gpu/amdgpu/ras.rst, from drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c.

* ``device/ras/features``: ``feature mask: 0x<hex>``, the RAS blocks enabled.
  0, or no ``ras/`` directory, means RAS is off; no count below is read then.
* ``device/ras/<block>_err_count``, for ``umc``, ``gfx``, ``sdma``, ``xgmi_wafl``, ...:
  lines ``ue: <count>``, uncorrectable, and ``ce: <count>``, corrected.
  ``Query currently inaccessible`` while the driver recovers; it is not read.
* ``device/ras/gpu_vram_bad_pages``: one line per bad page, ``<pfn> : <size> : <flag>``.
  The flag is ``R``, reserved: retired.
  Or ``P``, pending: reserved at the next window.
  Or ``F``: could not be reserved.
"""

from __future__ import annotations

from nfd_gpu.discovery.health import BadCount, parse_count
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, HealthReason, Snapshot
from nfd_gpu.record import replace


def parse_features(text: str) -> int | None:
    """Return the mask of ``feature mask: 0x...``; None when the text is not that."""
    head, _, mask = text.strip().partition(":")
    if head.strip() != "feature mask":
        return None
    digits = mask.strip().removeprefix("0x")
    if not 0 < len(digits) <= 16 or not all(c in "0123456789abcdefABCDEF" for c in digits):
        return None  # ASCII hex of a 64-bit mask only (int() takes "_" and other digits)
    return int(digits, 16)


def parse_err_count(text: str) -> tuple[int, int] | None:
    """Return ue and ce of an ``*_err_count`` file; None when it has neither.

    Raise BadCount when one is not a count.
    """
    counts: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("ue", "ce"):
            counts[key.strip()] = parse_count(value)
    if not counts:
        return None
    return counts.get("ue", 0), counts.get("ce", 0)


def parse_bad_pages(text: str) -> dict[str, int]:
    """Count bad pages by flag: ``R``, ``P``, ``F``."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(":")]
        if len(parts) == 3 and parts[2] in ("R", "P", "F"):
            out[parts[2]] = out.get(parts[2], 0) + 1
    return out


def read_ras(host: HostRoot, address: str) -> tuple[tuple[str, ...], tuple[HealthReason, ...]]:
    base = f"sys/bus/pci/devices/{address}/ras"
    mask = parse_features(host.read_text(f"{base}/features") or "")
    if not mask:
        return (), ()
    ue = ce = 0
    signals: list[str] = []
    for name in sorted(host.listdir(base)):
        if name.endswith("_err_count"):
            try:
                counts = parse_err_count(host.read_text(f"{base}/{name}") or "")
            except BadCount as exc:
                host.warn(f"/{base}/{name}: {exc}")
                continue
            if counts is not None:
                ue, ce = ue + counts[0], ce + counts[1]
                signals = ["sysfs.ras"]
    faults = [
        HealthReason(r, "sysfs", n)
        for r, n in (("ecc-uncorrectable", ue), ("correctable", ce))
        if n
    ]
    pages = host.read_text(f"{base}/gpu_vram_bad_pages")
    if pages is not None:
        signals.append("sysfs.vram-bad-pages")
        flags = parse_bad_pages(pages)
        for flag, reason in (("P", "vram-bad-pages-pending"), ("F", "vram-bad-pages-failed")):
            if flags.get(flag):
                faults.append(HealthReason(reason, "sysfs", flags[flag]))
    return tuple(signals), tuple(faults)


def _with_ras(host: HostRoot, g: Gpu) -> Gpu:
    signals, faults = read_ras(host, g.address)
    if not signals:
        return g
    return replace(g, health=g.health.read(signals, faults))


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus = tuple(_with_ras(ctx.host, g) if g.vendor == "amd" else g for g in snap.gpus)
    return replace(snap, gpus=gpus)


SOURCE = Source("amd-ras", _discover, needs=("amd",))
