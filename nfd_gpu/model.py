"""The snapshot model: immutable, JSON-serialisable records of what discovery found.

A :class:`Snapshot` is the single input of every labeler.
:func:`nfd_gpu.featuremap.snapshot_features` converts it to NFD's feature model:
``flags``, ``attributes`` and ``instances``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from nfd_gpu.record import Record, record, replace

if TYPE_CHECKING:
    from collections.abc import Callable

    from _typeshed import DataclassInstance

SCHEMA_VERSION = 1


@record()
class PcieLink(Record):
    """The PCIe link of a function: negotiated, that is current, and maximum.

    - ``port_*``: the maximum of the port above it, its upstream bridge.
      None when it has none, as a root complex integrated endpoint or in a VM.
    - ``gen`` and ``width`` are what the link can do: the lower of both ends' maximum.
      Linux calls them ``max_link_speed`` and ``max_link_width``; see docs/health.md "PCIe link".
    - The current speed is not a loss: GPUs train their link down to 2.5 GT/s when idle,
      and back up under load.
    """

    current_gen: int | None = None
    current_width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None
    port_max_gen: int | None = None
    port_max_width: int | None = None

    @property
    def gen(self) -> int | None:
        """The highest generation both ends support."""
        known = [g for g in (self.max_gen, self.port_max_gen) if g]
        return min(known) if known else self.current_gen

    @property
    def width(self) -> int | None:
        """The widest link both ends support."""
        known = [w for w in (self.max_width, self.port_max_width) if w]
        return min(known) if known else self.current_width

    @property
    def lanes_lost(self) -> int:
        """Lanes the link trained without: a real loss, since a link's width does not idle."""
        width = self.width
        return width - self.current_width if width and self.current_width else 0

    @property
    def degraded(self) -> bool:
        """True when the link trained narrower than both ends support."""
        return self.lanes_lost > 0


@record()
class PciDevice(Record):
    """One PCI function as sysfs shows it. Ids are lower-case hex without ``0x``."""

    address: str
    class_id: str  # 6 hex digits, e.g. "030200"
    vendor: str
    device: str
    subsystem_vendor: str = ""
    subsystem_device: str = ""
    revision: str = ""
    numa_node: int | None = None
    driver: str | None = None
    iommu_group: str | None = None
    sriov_totalvfs: int | None = None
    sriov_numvfs: int | None = None
    physfn: str | None = None
    virtfns: tuple[str, ...] = ()
    link: PcieLink | None = None
    drm: tuple[str, ...] = ()  # DRM nodes below the device: card0, renderD128
    iommu_type: str | None = None  # iommu_group/type (DMA, DMA-FQ, identity, ...)
    intel_iommu_version: str | None = None  # iommu/intel-iommu/version
    # (BAR index, size in bytes, flags) from ``resource``, for functions bound to a VFIO driver
    bars: tuple[tuple[int, int, int], ...] = ()
    # NFD pci.device attributes kept as NFD reads them where the typed fields could not
    # hold them: a malformed class/vendor/device, a negative sriov_totalvfs
    nfd_raw: tuple[tuple[str, str], ...] = ()

    @property
    def base_class(self) -> str:
        return self.class_id[:2]

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None


@record()
class Partition(Record):
    """A schedulable slice of a GPU: an NVIDIA MIG device or an AMD partition."""

    parent: str  # PCI address of the GPU
    kind: str  # "mig" | "amd"
    profile: str  # "1g.10gb", "cpx"
    index: int = 0
    memory_mib: int | None = None
    compute_units: int | None = None
    uuid: str | None = None
    simd_count: int | None = None  # AMD: SIMDs in the partition (KFD)
    # MIG device attributes (NVML nvmlDeviceGetAttributes on the MIG handle)
    slices_gi: int | None = None
    slices_ci: int | None = None
    engines_copy: int | None = None
    engines_decoder: int | None = None
    engines_encoder: int | None = None
    engines_jpeg: int | None = None
    engines_ofa: int | None = None


@record()
class NvidiaGpu(Record):
    """NVIDIA facts of a GPU: procfs, NVML, the model table, the vGPU capability.

    Empty, every fact unknown, on the GPUs of other vendors.
    """

    compute_major: int | None = None  # CUDA compute capability
    compute_minor: int | None = None
    mig_capable: bool | None = None
    mig_enabled: bool | None = None
    # NVML virtualization mode: none | passthrough (a VM with the GPU passed through) |
    # vgpu-guest | vgpu-host; None when unknown (no NVML)
    virtualization: str | None = None
    clique: str | None = None  # NVLink fabric "<clusterUUID>.<cliqueId>" (NVML fabric info)
    # the GPU carries NVIDIA's vGPU PCI vendor capability; known only where GFD can tell,
    # the config space of every NVIDIA PCI function read in full, else None (unknown)
    vgpu_capability: bool | None = None
    # vGPU guest: the host's vGPU manager version / branch (PCI vendor capability)
    vgpu_host_driver_version: str | None = None
    vgpu_host_driver_branch: str | None = None
    # nvmlInit's error where the NVML library is present (driver not loaded, library and
    # kernel module of different versions after an upgrade): GFD writes no label then
    nvml_init_error: str | None = None
    # NVML answered for this GPU in this pass, its name included (GFD sees a GPU only so);
    # False where its facts are procfs's or a stale NVML pass's, or no driver knows it
    nvml_answered: bool = False
    # CUDA (libcuda, or its recording) answered for this integrated GPU, its name included:
    # GFD's tegra strategy sees it only so
    cuda_answered: bool = False


@record()
class AmdGpu(Record):
    """AMD facts of a GPU: KFD, amdgpu sysfs, the model table. Empty on other vendors'."""

    gfx: str | None = None  # ISA name, e.g. gfx90a
    simd_count: int | None = None
    xcc_count: int | None = None
    board_product: str | None = None  # amdgpu sysfs product_name, verbatim
    compute_partitions_available: tuple[str, ...] = ()
    memory_partitions_available: tuple[str, ...] = ()
    # amdgpu offers available_<kind>_partition (the labeller's "partitioning supported")
    compute_partitioning_supported: bool = False
    memory_partitioning_supported: bool = False
    xgmi_peers: int | None = None
    partition_compute: str | None = None  # current compute partition mode (cpx, spx, ...)
    partition_memory: str | None = None  # current memory partition mode (nps1, ...)
    kfd_vram_mib: int | None = None  # KFD mem_banks/0 size_in_bytes (0 on a VF guest)


@record()
class IntelGpu(Record):
    """Intel facts of a GPU: i915 or xe sysfs, the model table. Empty on other vendors'."""

    tiles: int | None = None
    local_memory_bytes: int | None = None  # lmem_total_bytes x tiles (i915), VRAM (xe)


# A GPU's health, worst last (docs/health.md): "unknown": nothing of the GPU itself could be
# read; "no-driver": no driver is bound, so nothing can be (neither ok nor failed).
HEALTH_STATES = ("unknown", "ok", "no-driver", "degraded", "failed")


@record()
class HealthReason(Record):
    """One fault read on a GPU: what, from where, how much.

    - ``reason`` says what and ``source`` from where.
    - ``value`` is the count read: errors, pages, links down. For ``xid`` it is the XID code.
    - ``severity`` is ``degraded`` or ``failed``. It is set when :mod:`nfd_gpu.health`
      judges the reading against the thresholds; discovery leaves it empty.
    """

    reason: str  # ecc-uncorrectable, row-remap-pending, xid, aer-fatal, ... (docs/health.md)
    source: str  # nvml | nvml-events | sysfs
    value: int = 1
    severity: str = ""


@record()
class Health(Record):
    """A GPU's health record: its state, the faults behind it and the signals read.

    - ``signals`` names every signal that could be read: ``nvml.ecc``, ``sysfs.aer``, ...
    - A GPU with signals and no fault is ``ok``; one without any signal is ``unknown``.
    """

    state: str = "unknown"  # one of HEALTH_STATES
    reasons: tuple[HealthReason, ...] = ()
    signals: tuple[str, ...] = ()

    def read(self, signals: tuple[str, ...], reasons: tuple[HealthReason, ...] = ()) -> Health:
        """Return this record with more signals read and faults found; judging sets the state."""
        merged = tuple(sorted(set(self.signals) | set(signals)))
        return replace(self, signals=merged, reasons=self.reasons + reasons)


@record()
class Gpu(Record):
    """A physical GPU, or inside a VM the passed-through VF or vGPU.

    - The facts every vendor has are fields here.
    - Each vendor's own facts are in its record: ``nvidia``, ``amd``, ``intel``.
      It is empty on the other vendors' GPUs.
    - ``provenance`` says where each fact came from, apart from them.
      It names facts; labels never read it.
    - The JSON form is flat: :data:`GPU_JSON`. ``provenance`` is its ``sources`` key.
    """

    address: str
    vendor: str  # nvidia | amd | intel
    vendor_id: str
    device_id: str
    class_id: str
    subsystem_vendor_id: str = ""
    subsystem_device_id: str = ""
    revision: str = ""
    product: str | None = None  # marketing name as the vendor library reports it
    family: str | None = None
    memory_mib: int | None = None
    compute_units: int | None = None
    interconnects: tuple[str, ...] = ()  # "xgmi", "xe-link"
    driver: str | None = None
    numa_node: int | None = None
    sriov_totalvfs: int | None = None
    sriov_numvfs: int | None = None
    vfs: tuple[str, ...] = ()
    vf_drivers: tuple[str, ...] = ()  # sorted distinct drivers bound to the VFs
    guest_vf: bool = False  # a VF or vGPU seen inside a VM
    # a SoC's GPU (Jetson, IGX): a platform device, not a PCI function, sharing host memory
    integrated: bool = False
    link: PcieLink | None = None
    drm: tuple[str, ...] = ()
    uuid: str | None = None
    mode: str | None = None  # container | pf-passthrough | vf-passthrough | vgpu-host | vgpu-guest
    # where each fact came from: field name -> nvml | sysfs | procfs | pci.ids | table | kfd
    provenance: dict[str, str] = field(default_factory=dict)
    nvidia: NvidiaGpu = NvidiaGpu()
    amd: AmdGpu = AmdGpu()
    intel: IntelGpu = IntelGpu()
    health: Health = Health()


# The flat JSON form of a Gpu (``to_json``, the scan JSON's ``gpus``: scan-v1.schema.json):
# every key in order, and the record that holds it ("gpu": the Gpu itself). One row per fact
# but those v1 records in ``sources`` (:data:`V1_IN_SOURCES`): a new fact is a field of its
# record and a row here (tests/test_model.py checks both ways).
# A key is its field's name but for the fields renamed since v1 (:data:`JSON_FIELD`).
GPU_JSON: tuple[tuple[str, str], ...] = (
    ("address", "gpu"),
    ("vendor", "gpu"),
    ("vendor_id", "gpu"),
    ("device_id", "gpu"),
    ("class_id", "gpu"),
    ("subsystem_vendor_id", "gpu"),
    ("subsystem_device_id", "gpu"),
    ("revision", "gpu"),
    ("product", "gpu"),
    ("family", "gpu"),
    ("memory_mib", "gpu"),
    ("compute_major", "nvidia"),
    ("compute_minor", "nvidia"),
    ("gfx", "amd"),
    ("compute_units", "gpu"),
    ("simd_count", "amd"),
    ("xcc_count", "amd"),
    ("board_product", "amd"),
    ("compute_partitions_available", "amd"),
    ("memory_partitions_available", "amd"),
    ("interconnects", "gpu"),
    ("xgmi_peers", "amd"),
    ("tiles", "intel"),
    ("mig_capable", "nvidia"),
    ("mig_enabled", "nvidia"),
    ("driver", "gpu"),
    ("numa_node", "gpu"),
    ("sriov_totalvfs", "gpu"),
    ("sriov_numvfs", "gpu"),
    ("vfs", "gpu"),
    ("vf_drivers", "gpu"),
    ("guest_vf", "gpu"),
    ("integrated", "gpu"),
    ("link", "gpu"),
    ("drm", "gpu"),
    ("uuid", "gpu"),
    ("partition_compute", "amd"),
    ("partition_memory", "amd"),
    ("mode", "gpu"),
    ("virtualization", "nvidia"),
    ("clique", "nvidia"),
    ("vgpu_host_driver_version", "nvidia"),
    ("vgpu_host_driver_branch", "nvidia"),
    ("nvml_init_error", "nvidia"),
    ("sources", "gpu"),
    ("local_memory_bytes", "intel"),
    ("kfd_vram_mib", "amd"),
    ("health", "gpu"),
)
# JSON key -> field, where the field was renamed: nfd-gpu/v1 keeps publishing the old key
JSON_FIELD: dict[str, str] = {"sources": "provenance"}


def _vgpu_capability(sources: dict[str, str]) -> bool | None:
    """Known where every NVIDIA function's capability list was read; a guest's says vGPU."""
    if sources.get("vgpu_capability") != "pci-config":
        return None
    return sources.get("mode") == "pci-config"


# Facts nfd-gpu/v1 has no key for (scan-v1.schema.json allows no other key): v1 records each
# as the provenance of a fact that it does publish, in ``sources``, which discovery writes
# beside the fact. The JSON form leaves them out and :func:`gpu_from_dict` reads them back
# from there, so the JSON is v1's to the byte and still round-trips exactly
# (tests/test_model.py, every fixture with NVML replayed and off). field -> (record, reader)
V1_IN_SOURCES: dict[str, tuple[str, Callable[[dict[str, str]], bool | None]]] = {
    "compute_partitioning_supported": (
        "amd",
        lambda s: s.get("compute_partitions_available") == "sysfs",
    ),
    "memory_partitioning_supported": (
        "amd",
        lambda s: s.get("memory_partitions_available") == "sysfs",
    ),
    "vgpu_capability": ("nvidia", _vgpu_capability),
    "nvml_answered": ("nvidia", lambda s: s.get("product") == "nvml"),
    "cuda_answered": ("nvidia", lambda s: s.get("product") == "cuda"),
}


def gpu_to_dict(g: Gpu) -> dict[str, Any]:
    """Return the flat JSON form of ``g``: :data:`GPU_JSON`."""
    nested = dataclasses.asdict(g)  # {"address": ..., "nvidia": {"compute_major": ...}, ...}
    return {
        key: (nested if rec == "gpu" else nested[rec])[JSON_FIELD.get(key, key)]
        for key, rec in GPU_JSON
    }


def gpu_from_dict(d: dict[str, Any]) -> Gpu:
    """Build a :class:`Gpu` from its flat JSON form; a missing key keeps its default."""
    parts: dict[str, dict[str, Any]] = {"gpu": {}, "nvidia": {}, "amd": {}, "intel": {}}
    for key, rec in GPU_JSON:
        if key in d:
            parts[rec][JSON_FIELD.get(key, key)] = _value(key, d[key])
    sources = d.get("sources") or {}
    for name, (rec, read) in V1_IN_SOURCES.items():
        parts[rec][name] = read(sources)
    return Gpu(
        **parts["gpu"],
        nvidia=NvidiaGpu(**parts["nvidia"]),
        amd=AmdGpu(**parts["amd"]),
        intel=IntelGpu(**parts["intel"]),
    )


@record()
class VgpuType(Record):
    """A mediated-device type, or vGPU type, a GPU offers: ``mdev_supported_types/<type>``."""

    parent: str  # PCI address of the GPU
    type: str  # directory name, e.g. "nvidia-558"
    name: str | None = None
    available_instances: int | None = None
    device_api: str | None = None
    description: str | None = None


@record()
class DeviceNode(Record):
    """A device node under ``dev/``; in fixtures a regular file stands in for it."""

    path: str  # relative to the root, e.g. "dev/dri/renderD128"
    mode: str | None  # permission bits in octal, e.g. "0666"; None: derived from sysfs
    char_device: bool = False


@record()
class Runtime(Record):
    """Container-runtime facts around the GPUs, from ``nfd_gpu.discovery.runtime``."""

    dev_visible: bool = False  # the root has a dev/ directory
    device_nodes: tuple[DeviceNode, ...] = ()
    nvidia_toolkit_config: bool = False
    nvidia_runtime_binary: bool = False
    cdi_kinds: tuple[str, ...] = ()  # "nvidia.com/gpu", "amd.com/gpu"
    rocm_version: str | None = None
    opencl_icds: tuple[str, ...] = ()  # ICD file names without ".icd"
    level_zero: bool = False
    devices_ready: bool | None = None  # None: dev/ not visible or no GPU to check


@record()
class Snapshot(Record):
    """Everything one discovery pass found. Immutable; JSON round-trips exactly."""

    root: str
    pci: tuple[PciDevice, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    nvswitches: tuple[str, ...] = ()  # PCI addresses of NVSwitch bridges
    partitions: tuple[Partition, ...] = ()
    loaded_modules: tuple[str, ...] = ()
    builtin_modules: tuple[str, ...] = ()  # built into the kernel (modules.builtin, sys/module)
    driver_versions: dict[str, str] = field(default_factory=dict)  # module -> version
    driver_src_versions: dict[str, str] = field(default_factory=dict)  # module -> srcversion
    vendor_driver_versions: dict[str, str] = field(default_factory=dict)  # vendor -> version
    machine: str | None = None
    warnings: tuple[str, ...] = ()
    vgpu_types: tuple[VgpuType, ...] = ()
    runtime: Runtime | None = None
    # PCI addresses of GPUs the agent found on its first pass that are gone (fell off the
    # bus): failed GPUs of the node (nfd_gpu.health.HealthTracker, docs/health.md)
    lost_gpus: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["gpus"] = [gpu_to_dict(g) for g in self.gpus]
        d["schema"] = SCHEMA_VERSION
        return d

    def to_json(self, indent: int | None = 2) -> str:
        import json  # lazy: a scan printing labels never loads it

        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return Snapshot(
            root=d["root"],
            pci=tuple(_load(PciDevice, x) for x in d.get("pci", ())),
            gpus=tuple(gpu_from_dict(x) for x in d.get("gpus", ())),
            nvswitches=tuple(d.get("nvswitches", ())),
            partitions=tuple(_load(Partition, x) for x in d.get("partitions", ())),
            loaded_modules=tuple(d.get("loaded_modules", ())),
            builtin_modules=tuple(d.get("builtin_modules", ())),
            driver_versions=dict(d.get("driver_versions", {})),
            driver_src_versions=dict(d.get("driver_src_versions", {})),
            vendor_driver_versions=dict(d.get("vendor_driver_versions", {})),
            machine=d.get("machine"),
            warnings=tuple(d.get("warnings", ())),
            vgpu_types=tuple(_load(VgpuType, x) for x in d.get("vgpu_types", ())),
            runtime=_load_runtime(d.get("runtime")),
            lost_gpus=tuple(d.get("lost_gpus", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        import json  # lazy: as above

        return cls.from_dict(json.loads(text))


T = TypeVar("T", bound="DataclassInstance")


def _load(cls: type[T], d: dict[str, Any]) -> T:
    """Build a record from its ``asdict`` form: lists back to tuples, nested links."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in d:
            kwargs[f.name] = _value(f.name, d[f.name])
    return cls(**kwargs)


def _value(name: str, v: Any) -> Any:
    """Return a field's value from its JSON form: lists back to tuples, the PCIe link a record."""
    if name == "link" and v is not None:
        return PcieLink(**v)
    if name == "health" and isinstance(v, dict):
        reasons = tuple(HealthReason(**r) for r in v.get("reasons", ()))
        return Health(v.get("state", "unknown"), reasons, tuple(v.get("signals", ())))
    if isinstance(v, list):
        return tuple(tuple(x) if isinstance(x, list) else x for x in v)  # nfd_raw pairs
    return v


def _load_runtime(d: dict[str, Any] | None) -> Runtime | None:
    if d is None:
        return None
    nodes = tuple(_load(DeviceNode, x) for x in d.get("device_nodes", ()))
    rest = {k: v for k, v in d.items() if k != "device_nodes"}
    return replace(_load(Runtime, rest), device_nodes=nodes)
