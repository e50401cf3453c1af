"""AMD depth: KFD topology, amdgpu DRM sysfs attributes, partitions and XGMI.

Sources: see docs/amd-intel.md "AMD". The files are as in tests/data/amd/topo-mi210-xgmi-pcie.

* ``sys/class/kfd/kfd/topology/nodes/<n>/properties``: ``<key> <decimal>`` lines.
  GPU nodes have ``simd_count > 0``.
  ``gfx_target_version`` encodes major*10000 + minor*100 + stepping.
  It prints as ``gfx<major><minor><stepping:x>``.
  ``location_id`` holds bus in bits 8-15, device in 3-7 and function in 0-2.
  All partitions of one GPU share bus and device.
* ``nodes/<n>/mem_banks/<i>/properties``: ``size_in_bytes``.
* ``nodes/<n>/io_links/<i>/properties``: ``type 11`` is XGMI.
* ``sys/bus/pci/devices/<bdf>/{mem_info_vram_total, product_name,
  current_compute_partition, available_compute_partition,
  current_memory_partition, available_memory_partition}``.

Everything is best effort. Unreadable or odd files are warnings from :class:`HostRoot`,
and the facts stay unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from nfd_gpu.catalog import tables
from nfd_gpu.discovery.pciaddr import PciAddress
from nfd_gpu.discovery.source import Context, Source
from nfd_gpu.host import HostRoot
from nfd_gpu.model import AmdGpu, Gpu, Partition, Snapshot
from nfd_gpu.record import Record, record, replace

KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
Slot = tuple[int, int, int] | None  # (domain, bus, device) of an address, None for junk
IO_LINK_XGMI = 11
MIB = 1024 * 1024


def parse_properties(text: str | None) -> dict[str, int]:
    """Parse KFD ``properties``: ``<key> <integer>`` per line; other lines are ignored."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        key, value = parts
        if not key.replace("_", "").isalnum():
            continue
        try:
            out[key] = int(value, 10)
        except ValueError:
            continue
    return out


def gfx_name(version: int | None) -> str | None:
    """Turn ``gfx_target_version`` into an ISA name: 90010 -> gfx90a, 90402 -> gfx942."""
    if not version or version < 0:
        return None
    major = version // 10000 % 100
    minor = version // 100 % 100
    stepping = version % 100
    if major == 0 or stepping > 15:
        return None
    return f"gfx{major}{minor}{stepping:x}"


def location_address(domain: int, location_id: int) -> str:
    """Return the PCI address of a KFD node in the sysfs form, with the whole 32-bit domain."""
    return str(PciAddress.from_kfd(domain, location_id))


def slot_of(address: str) -> Slot:
    """Return domain, bus and device of a PCI address, compared as numbers.

    Partitions of a GPU differ only in the function. None for a text that is no address.
    """
    addr = PciAddress.parse(address)
    return addr.slot if addr is not None else None


def parse_partition_list(text: str | None) -> tuple[str, ...]:
    """Parse ``available_*_partition``: ``SPX, DPX, QPX, CPX`` -> "cpx", "dpx", "qpx", "spx"."""
    if not text or "not supported" in text.lower():
        return ()
    items = {p.strip().lower() for p in text.replace(",", " ").split()}
    return tuple(sorted(p for p in items if p.isalnum()))


def parse_partition_mode(text: str | None) -> str | None:
    """Parse ``current_*_partition``: one word, ``CPX`` or ``NPS4`` say, lower-cased; else None."""
    if not text:
        return None
    word = text.strip().split()[0].lower() if text.strip() else ""
    return word if word.isalnum() else None


@record()
class KfdNode(Record):
    """One KFD GPU node: a whole GPU, or one partition of it."""

    node: int
    address: str
    simd_count: int
    simd_per_cu: int | None
    gfx: str | None
    device_id: str | None
    num_xcc: int | None
    unique_id: str | None
    memory_bytes: int | None
    xgmi_peers: tuple[int, ...] = ()
    bank0_bytes: int | None = None

    @property
    def compute_units(self) -> int | None:
        if not self.simd_per_cu:
            return None
        return self.simd_count // self.simd_per_cu


def _node_memory(host: HostRoot, base: str) -> int | None:
    total = 0
    found = False
    for bank in host.listdir(f"{base}/mem_banks"):
        props = parse_properties(host.read_text(f"{base}/mem_banks/{bank}/properties"))
        size = props.get("size_in_bytes")
        if size is not None and size > 0:
            total += size
            found = True
    return total if found else None


def _bank0(host: HostRoot, base: str) -> int | None:
    """Return ``mem_banks/0`` ``size_in_bytes`` as written: the labeller's vram; 0 on a VF guest."""
    size = parse_properties(host.read_text(f"{base}/mem_banks/0/properties")).get("size_in_bytes")
    return size if size is not None and size >= 0 else None


def _xgmi_peers(host: HostRoot, base: str) -> tuple[int, ...]:
    peers = set()
    for link in host.listdir(f"{base}/io_links"):
        props = parse_properties(host.read_text(f"{base}/io_links/{link}/properties"))
        if props.get("type") == IO_LINK_XGMI and "node_to" in props:
            peers.add(props["node_to"])
    return tuple(sorted(peers))


def read_kfd(host: HostRoot) -> list[KfdNode]:
    """Return the GPU nodes of the KFD topology; CPU nodes, with ``simd_count 0``, are skipped."""
    out: list[KfdNode] = []
    names = host.listdir(KFD_NODES)
    for name in sorted((n for n in names if n.isdigit()), key=int):
        base = f"{KFD_NODES}/{name}"
        props = parse_properties(host.read_text(f"{base}/properties"))
        simd = props.get("simd_count", 0)
        if simd <= 0:
            continue
        loc = props.get("location_id")
        if loc is None:
            host.warn(f"/{base}/properties: GPU node without location_id")
            continue
        dev = props.get("device_id")
        unique = props.get("unique_id")
        out.append(
            KfdNode(
                node=int(name),
                address=location_address(props.get("domain", 0), loc),
                simd_count=simd,
                simd_per_cu=props.get("simd_per_cu") or None,
                gfx=gfx_name(props.get("gfx_target_version")),
                device_id=f"{dev:04x}" if dev is not None and 0 < dev <= 0xFFFF else None,
                num_xcc=props.get("num_xcc"),
                unique_id=str(unique) if unique else None,
                memory_bytes=_node_memory(host, base),
                xgmi_peers=_xgmi_peers(host, base),
                bank0_bytes=_bank0(host, base),
            )
        )
    return out


def _sum_known(values: Iterable[int | None]) -> int | None:
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return sum(v for v in vals if v is not None)


def enrich(
    host: HostRoot, gpus: tuple[Gpu, ...], kfd: list[KfdNode] | None = None
) -> tuple[tuple[Gpu, ...], tuple[Partition, ...]]:
    """Complete AMD GPUs from KFD and amdgpu sysfs; partitions come from KFD nodes."""
    if not any(g.vendor == "amd" for g in gpus):
        return gpus, ()
    nodes = read_kfd(host) if kfd is None else kfd
    by_slot: dict[Slot, list[KfdNode]] = {}
    for n in nodes:
        by_slot.setdefault(slot_of(n.address), []).append(n)
    peers_node_to_slot = {n.node: slot_of(n.address) for n in nodes}

    out: list[Gpu] = []
    partitions: list[Partition] = []
    for g in gpus:
        if g.vendor != "amd":
            out.append(g)
            continue
        slot = slot_of(g.address)
        mine = by_slot.get(slot, []) if slot is not None else []
        g2, parts = _enrich_one(host, g, mine, peers_node_to_slot)
        out.append(g2)
        partitions += parts
    return tuple(out), tuple(partitions)


def _enrich_one(
    host: HostRoot, g: Gpu, nodes: list[KfdNode], node_slot: dict[int, Slot]
) -> tuple[Gpu, list[Partition]]:
    """Complete one AMD GPU from the model table, amdgpu sysfs and its KFD ``nodes``."""
    dev = f"sys/bus/pci/devices/{g.address}"
    provenance = dict(g.provenance)
    info = tables.lookup("amd", g.device_id, g.revision)
    amd = AmdGpu(gfx=info.gfx if info else None)
    if amd.gfx is not None:
        provenance["gfx"] = "table"
    memory = g.memory_mib
    vram = host.read_int(f"{dev}/mem_info_vram_total")
    if vram and vram > 0:
        memory = vram // MIB
        provenance["memory_mib"] = "sysfs"
    elif nodes and (kfd_memory := _sum_known(n.memory_bytes for n in nodes)):
        memory = kfd_memory // MIB
        provenance["memory_mib"] = "kfd"
    g = replace(g, memory_mib=memory, amd=_amdgpu_attributes(host, dev, amd, provenance))
    if not nodes:
        return replace(g, provenance=provenance), []
    g = _with_kfd(g, nodes, node_slot, provenance)
    return replace(g, provenance=provenance), _partitions(g, nodes)


def _partitions(g: Gpu, nodes: list[KfdNode]) -> list[Partition]:
    """Return one partition per KFD node of a partitioned GPU; none for a single node."""
    if len(nodes) < 2:
        return []
    profile = g.amd.partition_compute or f"{len(nodes)}x"
    return [
        Partition(
            parent=g.address,
            kind="amd",
            profile=profile,
            index=i,
            memory_mib=n.memory_bytes // MIB if n.memory_bytes else None,
            compute_units=n.compute_units,
            uuid=n.unique_id,
            simd_count=n.simd_count,
        )
        for i, n in enumerate(nodes)
    ]


def _amdgpu_attributes(host: HostRoot, dev: str, amd: AmdGpu, provenance: dict[str, str]) -> AmdGpu:
    """Read board name and partition modes from the amdgpu attributes of the PCI device."""
    board = host.read_text(f"{dev}/product_name") or None
    if board:
        provenance["board_product"] = "sysfs"
    compute = parse_partition_mode(host.read_text(f"{dev}/current_compute_partition"))
    memory = parse_partition_mode(host.read_text(f"{dev}/current_memory_partition"))
    if compute:
        provenance["partition_compute"] = "sysfs"
    if memory:
        provenance["partition_memory"] = "sysfs"
    available: dict[str, tuple[str, ...]] = {}
    for kind in ("compute", "memory"):
        path = f"{dev}/available_{kind}_partition"
        if host.exists(path):  # the file exists: partitioning is supported (the labeller)
            available[kind] = parse_partition_list(host.read_text(path))
            provenance[f"{kind}_partitions_available"] = "sysfs"
    return replace(
        amd,
        board_product=board,
        partition_compute=compute,
        partition_memory=memory,
        compute_partitions_available=available.get("compute", ()),
        memory_partitions_available=available.get("memory", ()),
        compute_partitioning_supported="compute" in available,
        memory_partitioning_supported="memory" in available,
    )


def _with_kfd(
    g: Gpu, nodes: list[KfdNode], node_slot: dict[int, Slot], provenance: dict[str, str]
) -> Gpu:
    """Complete ``g`` from its KFD nodes, one per partition.

    It gets SIMDs, CUs, ISA, XCCs, unique id and XGMI peers: other GPUs' slots.
    """
    first = nodes[0]
    amd = g.amd
    provenance["simd_count"] = "kfd"
    units = g.compute_units
    if cus := _sum_known(n.compute_units for n in nodes):
        units = cus
        provenance["compute_units"] = "kfd"
    gfx = amd.gfx
    if first.gfx:
        gfx = first.gfx
        provenance["gfx"] = "kfd"
    uuid = g.uuid
    if first.unique_id and not g.uuid:
        uuid = first.unique_id
        provenance["uuid"] = "kfd"
    own = slot_of(g.address)
    peers = {node_slot.get(p) for n in nodes for p in n.xgmi_peers}
    peers.discard(None)
    peers.discard(own)
    interconnects = tuple(sorted({*g.interconnects, "xgmi"})) if peers else g.interconnects
    bank0 = first.bank0_bytes
    amd = replace(
        amd,
        kfd_vram_mib=bank0 // MIB if bank0 is not None else amd.kfd_vram_mib,
        simd_count=sum(n.simd_count for n in nodes),
        gfx=gfx,
        xcc_count=_sum_known(n.num_xcc for n in nodes) or amd.xcc_count,
        xgmi_peers=len(peers) if peers else amd.xgmi_peers,
    )
    return replace(g, compute_units=units, uuid=uuid, interconnects=interconnects, amd=amd)


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus, parts = enrich(ctx.host, snap.gpus)
    return replace(snap, gpus=gpus, partitions=snap.partitions + parts)


SOURCE = Source("amd", _discover, needs=("amd",))
