"""Adapter for ``pyamdgpuinfo``, over libdrm: marketing name and VRAM size per GPU.

- The only module that imports ``pyamdgpuinfo``, lazily.
- The library opens the real ``/dev/dri`` nodes.
  So it is used only when the host root is ``/`` and ``/dev/dri`` exists.
- It raises ``OSError``, for no permission or no device, or ``RuntimeError``.
  Every failure becomes a warning, never a crash.

API facts of mark9064/pyamdgpuinfo 2.1.x:

- ``detect_gpus() -> int``;
- ``get_gpu(i)`` with ``.pci_slot``: ``0000:03:00.0`` or None;
- ``.name``: str or None;
- ``.memory_info["vram_size"]``: bytes or None.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from nfd_gpu.discovery.pciaddr import canonical
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, Snapshot
from nfd_gpu.record import Record, record, replace

MODULE = "pyamdgpuinfo"


@record()
class AmdgpuInfo(Record):
    pci_slot: str
    name: str | None
    vram_bytes: int | None


def usable(host: HostRoot) -> bool:
    """Tell whether the library may run: it reads the live /dev/dri, so only for the real root."""
    return host.root == "/" and os.path.isdir("/dev/dri")


def query(host: HostRoot, *, force: bool = False) -> dict[str, AmdgpuInfo]:
    """Map PCI address, sysfs form, to facts; empty when unavailable, with a warning on failure."""
    if not force and not usable(host):
        return {}
    try:
        mod: Any = importlib.import_module(MODULE)
    except ImportError:
        return {}
    except Exception as exc:  # a broken extension module
        host.warn(f"{MODULE}: import failed: {exc}")
        return {}
    try:
        count = int(mod.detect_gpus())
    except Exception as exc:
        host.warn(f"{MODULE}: detect_gpus failed: {exc}")
        return {}
    out: dict[str, AmdgpuInfo] = {}
    for i in range(max(count, 0)):
        try:
            gpu = mod.get_gpu(i)
            slot = gpu.pci_slot
            name = gpu.name
            mem = gpu.memory_info
            vram = mem.get("vram_size") if isinstance(mem, dict) else None
        except Exception as exc:
            host.warn(f"{MODULE}: get_gpu({i}) failed: {exc}")
            continue
        if not isinstance(slot, str) or not slot:
            continue
        address = canonical(slot)
        if address is None:
            host.warn(f"{MODULE}: GPU {i}: PCI slot {slot[:40]!r} is not an address")
            continue
        out[address] = AmdgpuInfo(
            pci_slot=address,
            name=name.strip() if isinstance(name, str) and name.strip() else None,
            vram_bytes=vram if isinstance(vram, int) and vram > 0 else None,
        )
    return out


def apply(gpus: tuple[Gpu, ...], infos: dict[str, AmdgpuInfo]) -> tuple[Gpu, ...]:
    """Return AMD GPUs with the library's name and VRAM; library facts win over tables."""
    if not infos:
        return gpus
    out = []
    for g in gpus:
        info = infos.get(canonical(g.address) or g.address) if g.vendor == "amd" else None
        if info is None:
            out.append(g)
            continue
        provenance = dict(g.provenance)
        product, memory = g.product, g.memory_mib
        if info.name:
            product = info.name
            provenance["product"] = MODULE
        if info.vram_bytes:
            memory = info.vram_bytes // (1024 * 1024)
            provenance["memory_mib"] = MODULE
        out.append(replace(g, product=product, memory_mib=memory, provenance=provenance))
    return tuple(out)


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    return replace(snap, gpus=apply(snap.gpus, query(ctx.host)))


SOURCE = Source("amdgpuinfo", _discover, needs=("amd",))
