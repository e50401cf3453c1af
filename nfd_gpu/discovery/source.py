"""The shape of a discovery source: one step that reads the host and adds to the snapshot.

Every source has three fields, and :class:`Source` is those three:

- a name;
- the GPU vendors it needs. It is skipped when no GPU of those vendors was found.
  ``()`` means always run;
- ``discover(ctx, snapshot) -> snapshot``. It reads the host through ``ctx.host``,
  a :class:`~nfd_gpu.host.HostRoot`. It returns the snapshot with its facts added.
  The snapshot is frozen, so that is :func:`nfd_gpu.record.replace`.

Sources never raise for hardware problems: those are warnings on the host.

A GPU vendor is a :class:`Vendor`:

- its PCI id, names and drivers: what the shared steps need to recognise its GPUs;
- its own sources.

Each vendor package defines one ``VENDOR``: ``discovery/nvidia/``, ``discovery/amd/``,
``discovery/intel/``.

The vendors and the ordered list of sources are in :mod:`nfd_gpu.discovery.registry`:
``VENDORS`` and ``SOURCES``. The order is part of the behaviour: later sources refine the
GPU records earlier ones built.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from nfd_gpu.host import HostRoot
from nfd_gpu.model import Snapshot
from nfd_gpu.record import Record, record

if TYPE_CHECKING:
    from nfd_gpu.discovery.nvidia.session import NvmlSession


@record(slots=False)
class Context(Record):
    """What one discovery pass reads from, beyond the snapshot built so far."""

    host: HostRoot
    nvml_lib: ModuleType | None = None  # replaces the NVML library (``nfd-gpu snapshot``)
    nvml: NvmlSession | None = None  # the NVML session (mode; the agent's kept state)
    # read the pci.device attributes only NFD's features carry (``iommu_group/type``,
    # ``iommu/intel-iommu/version``): False when no rule or output will see pci.device
    nfd_attributes: bool = True


@record(slots=False)
class Source(Record):
    """One discovery step; see the module docstring.

    Most are a module's ``SOURCE``. The shared steps that must know the vendors are built by
    a ``source(vendors)``.
    """

    name: str
    discover: Callable[[Context, Snapshot], Snapshot]
    needs: tuple[str, ...] = ()  # GPU vendors that must be present; () = always


@record(slots=False)
class Vendor(Record):
    """One GPU vendor: what the shared steps need to know of it, and its own sources."""

    name: str  # Gpu.vendor, the model table nfd_gpu/data/<name>.tsv
    pci_id: str  # PCI vendor id, 4 lower-case hex digits
    display: str  # prefix of a product name made from pci.ids ("NVIDIA H100")
    # kernel drivers that give containers the GPU (mode "container"); the vendor's driver
    # version is that of the first of them with a module version (``module-versions``)
    drivers: tuple[str, ...]
    modules: tuple[str, ...]  # kernel modules whose version is reported (sys/module/<m>/version)
    sources: tuple[Source, ...]  # the vendor's own steps, in order; they run after ``gpus``
    sriov_host_drivers: tuple[str, ...] = ()  # host drivers handing VFs to VMs: "vf-passthrough"
    # every processing-accelerator (class 0x12) function is a GPU; else only those the
    # vendor's model table lists (Intel's 0x12 NPUs are not GPUs)
    accelerators_are_gpus: bool = False
    # Its device nodes (discovery/runtime.py, the snapshot's dev/ filter). A container of
    # one of its GPUs needs dev/dri/renderD<N> (unless ``render_node`` is False), each of
    # ``dev_needs`` and, with ``dev_per_gpu``, one dev/<dev_per_gpu><N> per GPU; the nodes
    # listed under dev/ are those named by a ``dev_list`` prefix. Without dev/ they are
    # derived from sysfs (dev/<n> from sys/class/<n>/<n>) unless ``dev_in_sysfs`` is False
    # (nodes made by mknod, no trace in sysfs).
    dev_list: tuple[str, ...] = ()
    dev_needs: tuple[str, ...] = ()
    dev_per_gpu: str = ""
    render_node: bool = True
    dev_in_sysfs: bool = True


def wanted(source: Source, snap: Snapshot) -> bool:
    """Tell whether ``source`` runs on this snapshot: always, or when a GPU it needs is there."""
    return not source.needs or any(g.vendor in source.needs for g in snap.gpus)
