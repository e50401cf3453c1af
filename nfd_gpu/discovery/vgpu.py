"""Mediated-device types offered by GPUs, that is vGPU types: ``mdev_supported_types``.

- Linux's ``Documentation/ABI/testing/sysfs-bus-vfio-mdev``: each
  ``<device>/mdev_supported_types/<type-id>/`` directory holds ``device_api`` and
  ``available_instances``, both mandatory. ``name`` and ``description`` are optional.
- NVIDIA vGPU uses it, as ``nvidia-<n>``; so does Intel GVT-g, as ``i915-GVTg_V5_<n>``.
- A GPU that offers types is a vGPU host, mode ``vgpu-host``, unless it is passed through.
"""

from __future__ import annotations

from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, Snapshot, VgpuType
from nfd_gpu.record import replace

PASSTHROUGH_MODES = ("pf-passthrough",)


def parse_count(text: str | None) -> int | None:
    """Parse ``available_instances``: a non-negative decimal; None otherwise."""
    if text is None:
        return None
    token = text.strip()
    return int(token) if token.isascii() and token.isdigit() else None


def _one_line(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(text.split())
    return line[:200] or None


def read_types(host: HostRoot, gpus: tuple[Gpu, ...]) -> tuple[VgpuType, ...]:
    out: list[VgpuType] = []
    for g in gpus:
        base = f"sys/bus/pci/devices/{g.address}/mdev_supported_types"
        for t in host.listdir(base):
            d = f"{base}/{t}"
            if not host.is_dir(d):
                continue
            out.append(
                VgpuType(
                    parent=g.address,
                    type=t,
                    name=_one_line(host.read_text(f"{d}/name")),
                    available_instances=parse_count(host.read_text(f"{d}/available_instances")),
                    device_api=_one_line(host.read_text(f"{d}/device_api")),
                    description=_one_line(host.read_text(f"{d}/description")),
                )
            )
    return tuple(out)


def apply(gpus: tuple[Gpu, ...], types: tuple[VgpuType, ...]) -> tuple[Gpu, ...]:
    """Mark GPUs offering mdev types ``vgpu-host``; a passed-through GPU stays so."""
    parents = {t.parent for t in types}
    out = []
    for g in gpus:
        if g.address in parents and g.mode not in PASSTHROUGH_MODES:
            provenance = {**g.provenance, "mode": "sysfs"}
            g = replace(g, mode="vgpu-host", provenance=provenance)
        out.append(g)
    return tuple(out)


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    types = read_types(ctx.host, snap.gpus)
    return replace(snap, gpus=apply(snap.gpus, types), vgpu_types=types)


SOURCE = Source("vgpu", _discover)
