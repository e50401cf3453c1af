"""GFD's ``tegra`` device discovery strategy (``flags.deviceDiscoveryStrategy: tegra``, and
``auto`` on a Tegra host): the integrated GPU of a Jetson labelled from what CUDA answers, as
NVIDIA/k8s-device-plugin v0.19.0's CUDA resource manager does (``internal/resource/
cuda-lib.go``, ``cuda-device.go``; ``internal/cuda``).

- Which strategy ``auto`` is (``internal/resource/factory.go`` resolveMode; go-nvlib
  ``pkg/nvlib/info/resolver.go``): tegra where the host has Tegra files (``/etc/nv_tegra_release``)
  and NVML answers for no GPU of the ``nvidia`` driver (an integrated GPU is no PCI function:
  NVML's iGPU names, ``Orin (nvgpu)`` / ``NVIDIA Thor``, never merge into a PCI record).
- The GPUs: those CUDA answered for (``cuDeviceGetCount``); when CUDA does not answer
  (``cuInit`` fails, no ``libcuda.so.1``) GFD's init fails: no labels, or with
  ``failOnInitError: false`` only the labelers that need no device.
- Per GPU: name (``cuDeviceGetName``), memory (``cuDeviceTotalMem`` in MiB), compute
  capability; no MIG, PCI class 0 (``gpu.mode=unknown``), no fabric.
- Versions: driver ``unknown.unknown.unknown`` (``cuda-lib.go`` GetDriverVersion), CUDA
  from ``cuDriverGetVersion``.
- ``vgpu.*``: GFD lists the NVIDIA PCI functions; a Jetson has none: ``vgpu.present=false``.
"""

from __future__ import annotations

from nfd_gpu.labels.nvidia_vfio import unknown_driver_version_labels
from nfd_gpu.model import Gpu, Snapshot


def is_tegra_host(snap: Snapshot) -> bool:
    """``auto`` resolves to tegra here (module docstring)."""
    nvml = any(g.nvidia.nvml_answered for g in snap.gpus if g.driver == "nvidia")
    return "l4t" in snap.driver_versions and not nvml


def cuda_gpus(snap: Snapshot) -> list[Gpu]:
    """The GPUs GFD's CUDA manager lists: those CUDA answered for."""
    return [g for g in snap.gpus if g.integrated and g.nvidia.cuda_answered]


def vgpu_labels(pci_gpus: list[Gpu]) -> dict[str, str] | None:
    """GFD's vGPU labeler when no NVIDIA PCI function is there (a Jetson): ``false``; None
    when there are some (the PCI labeler's rule applies)."""
    return None if pci_gpus else {"vgpu.present": "false"}


def version_labels(cuda: str) -> dict[str, str]:
    """``cuda.*`` of the CUDA manager: the fixed driver version, CUDA's own version."""
    return unknown_driver_version_labels(cuda)
