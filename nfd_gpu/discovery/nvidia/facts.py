"""The common shape of NVIDIA facts: what procfs and NVML both return.

- procfs is :mod:`~nfd_gpu.discovery.nvidia.procfs`; NVML is :mod:`~nfd_gpu.discovery.nvidia.nvml`.
- So either merges into the GPU records the same way: see :mod:`~nfd_gpu.discovery.nvidia.driver`.
- It is a module of its own so that the NVML adapter and session import it without
  importing the driver source. That source asks the session: no import cycle.
"""

from __future__ import annotations

from dataclasses import field

from nfd_gpu.model import HealthReason, Partition
from nfd_gpu.record import Record, record

NVML_RECORDING = "nvml.json"  # an NVML recording at the root of a fixture or capture


@record()
class GpuFacts(Record):
    """What the NVIDIA driver says about one GPU; None means unknown."""

    address: str  # sysfs form (pciaddr.canonical): matched as a number, any domain width
    product: str | None = None
    uuid: str | None = None
    minor: int | None = None
    memory_mib: int | None = None
    compute_major: int | None = None
    compute_minor: int | None = None
    mig_enabled: bool | None = None
    mig_capable: bool | None = None
    multiprocessors: int | None = None
    virtualization: str | None = None  # none | passthrough | vgpu-guest | vgpu-host
    clique: str | None = None  # NVLink fabric "<clusterUUID>.<cliqueId>"
    # health signals read and faults found (nvml.health; judged in nfd_gpu.health)
    health_signals: tuple[str, ...] = ()
    health_reasons: tuple[HealthReason, ...] = ()
    source: str = ""  # where these facts came from, when not the NvidiaFacts' source


@record()
class NvidiaFacts(Record):
    source: str  # "procfs" | "nvml"
    driver_version: str | None = None
    kernel_module: str | None = None  # "open" | "proprietary"
    cuda_version: str | None = None  # "12.4" (NVML only)
    gpus: tuple[GpuFacts, ...] = ()
    partitions: tuple[Partition, ...] = ()
    device_nodes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    nvml_init_error: str | None = None  # nvmlInit failed with the library present: why
