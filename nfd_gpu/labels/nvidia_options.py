"""The nvidia profile's options, :class:`NvidiaOptions`, and its MIG strategies.

They are in a module of their own for two reasons:

- :class:`~nfd_gpu.labels.profile.LabelOptions` names them without importing the profile.
  So there is no import cycle, type-only ones included: ``tests/test_layers.py``.
- Listing ``scan``'s options loads no profile code; their help names the strategies.

The profile, :mod:`nfd_gpu.labels.nvidia`, reads them and re-exports the names.
"""

from __future__ import annotations

from dataclasses import field

from nfd_gpu.record import Record, record

GFD_MIG_STRATEGIES = ("none", "single", "mixed")  # GFD's --mig-strategy; none: its default
MIG_STRATEGIES = ("auto", *GFD_MIG_STRATEGIES)  # auto: nfd-gpu's own (the profile's docstring)


@record(slots=False)
class NvidiaOptions(Record):
    """Options of the nvidia profile: MIG strategy and the device plugin's sharing config.

    - ``mig_strategy``: ``none``, ``single`` and ``mixed`` behave as GFD's ``--mig-strategy``.
      ``none`` is the default, GFD's.
    - ``auto`` derives it from the hardware: see :mod:`nfd_gpu.labels.nvidia`.
    - ``replicas`` maps a resource name to its replicas in the active block.
      Names are like ``nvidia.com/gpu`` or ``nvidia.com/mig-1g.5gb``.
    - ``sharing`` is ``time-slicing`` or ``mps``.
    """

    mig_strategy: str = "none"
    sharing: str = "time-slicing"
    replicas: dict[str, int] = field(default_factory=dict)
    rename_by_default: bool = False
    timestamp: int | None = None  # gfd.timestamp (Unix seconds), None: not emitted
    # GFD's flags.failOnInitError: False labels a node whose nvmlInit fails with
    # gfd.timestamp and vgpu.* only (GFD's default, True: no label)
    fail_on_init_error: bool = True
    # GFD's flags.deviceDiscoveryStrategy: auto / nvml (NVML's GPUs), vfio (GPUs bound to
    # vfio-pci, from PCI: nfd_gpu.labels.nvidia_vfio) or tegra (a Jetson's, CUDA's:
    # nfd_gpu.labels.nvidia_tegra; also auto on a Tegra host)
    discovery: str = "auto"
