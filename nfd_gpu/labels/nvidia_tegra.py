"""GFD's ``tegra`` device discovery strategy: a Jetson's integrated GPU, as CUDA answers.

It is ``flags.deviceDiscoveryStrategy: tegra``, and ``auto`` on a Tegra host.
It works as NVIDIA/k8s-device-plugin v0.19.0's CUDA resource manager does.
See ``internal/resource/cuda-lib.go``, ``cuda-device.go`` and ``internal/cuda``.

- Which strategy ``auto`` is: see ``internal/resource/factory.go`` resolveMode and
  go-nvlib's ``pkg/nvlib/info/resolver.go``.
  It is tegra where the host has Tegra files, ``/etc/nv_tegra_release``,
  and NVML answers for no GPU of the ``nvidia`` driver.
  An integrated GPU is no PCI function. NVML's iGPU names, ``Orin (nvgpu)`` and
  ``NVIDIA Thor``, never merge into a PCI record.
- The GPUs: those CUDA answered for, by ``cuDeviceGetCount``.
  When CUDA does not answer, GFD's init fails: ``cuInit`` fails, or no ``libcuda.so.1``.
  Then there are no labels. With ``failOnInitError: false``, only the labelers that need
  no device run.
- Per GPU: name by ``cuDeviceGetName``, memory by ``cuDeviceTotalMem`` in MiB,
  compute capability.
  No MIG, PCI class 0 so ``gpu.mode=unknown``, no fabric.
- Versions: driver ``unknown.unknown.unknown``, from ``cuda-lib.go`` GetDriverVersion.
  CUDA from ``cuDriverGetVersion``.
- ``vgpu.*``: GFD lists the NVIDIA PCI functions. A Jetson has none: ``vgpu.present=false``.
"""

from __future__ import annotations

from nfd_gpu.labels.nvidia_vfio import unknown_driver_version_labels
from nfd_gpu.model import Gpu, Snapshot


def is_tegra_host(snap: Snapshot) -> bool:
    """Tell whether ``auto`` resolves to tegra here; see the module docstring."""
    nvml = any(g.nvidia.nvml_answered for g in snap.gpus if g.driver == "nvidia")
    return "l4t" in snap.driver_versions and not nvml


def cuda_gpus(snap: Snapshot) -> list[Gpu]:
    """Return the GPUs GFD's CUDA manager lists: those CUDA answered for."""
    return [g for g in snap.gpus if g.integrated and g.nvidia.cuda_answered]


def vgpu_labels(pci_gpus: list[Gpu]) -> dict[str, str] | None:
    """Return GFD's vGPU labeler's output when no NVIDIA PCI function is there: ``false``.

    That is a Jetson. None when there are some: the PCI labeler's rule applies.
    """
    return None if pci_gpus else {"vgpu.present": "false"}


def version_labels(cuda: str) -> dict[str, str]:
    """Return ``cuda.*`` of the CUDA manager: the fixed driver version, CUDA's own version."""
    return unknown_driver_version_labels(cuda)
