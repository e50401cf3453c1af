"""The ``identify`` source, after every vendor's: derive before omitting.

A GPU whose family the model table does not give gets it from what the driver or hardware
reported. See :mod:`nfd_gpu.catalog.families`.

- NVIDIA: the compute capability, from NVML or the table.
- AMD: the ISA target, from KFD or the table.
- The family's provenance, in ``Gpu.provenance``, is the source of the fact it was derived from.

A GPU still without a family is unknown to nfd-gpu:

- one warning per distinct set of ids names them and says how to report it;
- the ids are vendor:device, subsystem vendor:device, revision;
- its other facts are labelled as usual;
- nothing is guessed from id ranges.
"""

from __future__ import annotations

from nfd_gpu.catalog import tables
from nfd_gpu.catalog.families import amd_family, nvidia_family
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.model import Gpu, Snapshot
from nfd_gpu.record import replace

REPORT_HOWTO = (
    "please report it with these ids and the output of `nfd-gpu snapshot DIR` "
    "(docs/labels.md, 'Unknown GPUs')"
)


def derived_family(g: Gpu) -> tuple[str, str] | None:
    """Return family and source from the GPU's own facts, or None."""
    nv = g.nvidia
    if g.vendor == "nvidia" and nv.compute_major is not None and nv.compute_minor is not None:
        family = nvidia_family(nv.compute_major, nv.compute_minor)
        if family:
            return family, g.provenance.get("compute_capability", "unknown")
    if g.vendor == "amd" and (family := amd_family(g.amd.gfx)):
        return family, g.provenance.get("gfx", "unknown")
    return None


def with_family(g: Gpu) -> Gpu:
    """Return ``g`` with its derived family when the table gave none."""
    if g.family is not None:
        return g
    found = derived_family(g)
    if found is None:
        return g
    family, source = found
    return replace(g, family=family, provenance={**g.provenance, "family": source})


def ids(g: Gpu) -> str:
    """Write ``vendor:device, subsystem vendor:device, revision`` as lspci -nn prints them."""
    return (
        f"{g.vendor_id}:{g.device_id}, subsystem {g.subsystem_vendor_id or '?'}:"
        f"{g.subsystem_device_id or '?'}, revision {g.revision or '?'}"
    )


def unknown_warnings(gpus: tuple[Gpu, ...]) -> list[str]:
    """Return one line per distinct set of ids of the GPUs whose family is still unknown."""
    by_ids: dict[str, list[Gpu]] = {}
    for g in gpus:
        if g.family is None:
            by_ids.setdefault(ids(g), []).append(g)
    out = []
    for key, group in by_ids.items():
        g = group[0]
        where = ", ".join(x.address for x in group)
        known = tables.lookup(g.vendor, g.device_id, g.revision) is not None
        table = "has no family in nfd-gpu's table" if known else "is in no nfd-gpu table"
        out.append(
            f"unknown GPU ({key}) at {where}: {g.product or 'no name'} {table} and its "
            f"family could not be derived, so family labels are omitted; {REPORT_HOWTO}"
        )
    return out


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus = tuple(with_family(g) for g in snap.gpus)
    for line in unknown_warnings(gpus):
        ctx.host.warn(line)
    return replace(snap, gpus=gpus)


SOURCE = Source("identify", _discover)
