"""The host facts a DaemonSet pod cannot read, and the labels each may cost.

One list for both judges of the pod: tests/deploy/test_pod_view.py (the pod's view of a
fixture, simulated from the rendered mounts) and tests/node (a real pod on a real kubelet);
docs/install.md says the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.deploy import podview


@dataclass(frozen=True)
class Unavailable:
    """A host fact the pod cannot read."""

    paths: tuple[str, ...]  # globs relative to the host root
    applies: Callable[[podview.PodSpec], bool]
    reason: str
    labels: tuple[str, ...]  # label keys (globs) it may change or remove


def _mounted(pod: podview.PodSpec, *host_paths: str) -> bool:
    return set(host_paths) <= {m.host_path for m in pod.mounts}


_OPT_IN = (
    "is mounted only with the host-runtime-config component (Helm hostRuntimeConfig.*), as "
    'a hostPath of type Directory: DirectoryOrCreate (and type "", which the container '
    "runtime turns into a mkdir) would create it on every host, and a parent (/etc, /run) "
    "would expose far more, the container runtime's sockets among it."
)

UNAVAILABLE: dict[str, Unavailable] = {
    "CDI specs": Unavailable(
        paths=("etc/cdi", "var/run/cdi"),
        applies=lambda pod: not _mounted(pod, "/etc/cdi", "/var/run/cdi"),
        reason="/etc/cdi and /var/run/cdi " + _OPT_IN,
        labels=("gpu.feature.node.kubernetes.io/runtime.cdi*",),
    ),
    "OpenCL ICDs": Unavailable(
        paths=("etc/OpenCL/vendors",),
        applies=lambda pod: not _mounted(pod, "/etc/OpenCL/vendors"),
        reason="/etc/OpenCL/vendors " + _OPT_IN,
        labels=("gpu.feature.node.kubernetes.io/runtime.opencl*",),
    ),
    "NVIDIA device nodes": Unavailable(
        paths=("dev",),
        applies=lambda pod: True,
        reason=(
            "/dev is not mounted (a hostPath /dev exposes every device node for writing: "
            "read-only mounts do not apply to device files). /dev/dri, /dev/kfd and "
            "/dev/vfio/<group> are created by the kernel (devtmpfs) and derived from sysfs, "
            "but /dev/nvidia* are made by nvidia-modprobe with mknod and leave no trace in "
            "sysfs; hostPath takes no globs and turns a missing path into a directory."
        ),
        labels=("gpu.feature.node.kubernetes.io/devices.ready",),
    ),
    "Jetson L4T release": Unavailable(
        paths=("etc/nv_tegra_release",),
        applies=lambda pod: True,
        reason=(
            "/etc/nv_tegra_release exists only on Jetson/IGX hosts: a hostPath of type File "
            "stops the pod on every other node, an untyped one creates a directory there, "
            "and /etc as a whole would expose the host's configuration. The family and "
            "compute capability still come from the device tree under /sys."
        ),
        labels=(
            "gpu.feature.node.kubernetes.io/nvidia.l4t.*",
            "gpu.feature.node.kubernetes.io/driver.*",
            "gpu.feature.node.kubernetes.io/nvidia.driver.*",
        ),
    ),
    "Jetson unified memory": Unavailable(
        paths=("proc/meminfo", "cuda.json"),
        applies=lambda pod: True,
        reason=(
            "A Jetson GPU's memory is the kernel's MemTotal (/proc/meminfo) or CUDA's answer "
            "(libcuda, not in the image): the pod mounts /proc/driver only (the host's /proc "
            "would show it the host's processes)."
        ),
        labels=(
            "gpu.feature.node.kubernetes.io/memory-mib",
            "gpu.feature.node.kubernetes.io/class",
            "gpu.feature.node.kubernetes.io/nvidia.cuda.*",
            "gpu.feature.node.kubernetes.io/product*",
        ),
    ),
    "ROCm version": Unavailable(
        paths=("opt/rocm",),
        applies=lambda pod: True,
        reason=(
            "/opt/rocm is not mounted: it is usually a chain of absolute links "
            "(/opt/rocm -> /etc/alternatives/rocm -> /opt/rocm-<version>) that does not "
            "resolve inside a mount, and a hostPath where ROCm is absent would create an "
            "empty /opt/rocm directory, which breaks a later ROCm install. Containers bring "
            "their own ROCm; the host's version is for `nfd-gpu scan` on the host."
        ),
        labels=(
            "gpu.feature.node.kubernetes.io/runtime.rocm.version",
            "gpu.feature.node.kubernetes.io/runtime.rocm.major",
        ),
    ),
    "PCI config space past 64 bytes": Unavailable(
        paths=("sys/devices/**/config",),
        applies=lambda pod: not pod.sys_admin,
        reason=(
            "The kernel gives a reader without CAP_SYS_ADMIN only the first 64 bytes of a "
            "PCI function's config file (drivers/pci/pci-sysfs.c pci_read_config); the "
            "capability list with NVIDIA's vGPU capability lies past them. The pod runs as "
            "a non-root user with every capability dropped (GFD's own DaemonSet runs "
            "privileged for this read); CAP_SYS_ADMIN would be most of root."
        ),
        labels=(
            "nvidia.com/vgpu.*",
            # a vGPU guest without NVML: the capability was its only witness
            "gpu.feature.node.kubernetes.io/mode",
            "gpu.feature.node.kubernetes.io/virtualization",
        ),
    ),
    "NVML": Unavailable(
        paths=(podview.NVML_RECORDING,),
        applies=lambda pod: not pod.nvml,
        reason=(
            "NVML (libnvidia-ml and the NVIDIA device nodes) is in the container only under "
            "the NVIDIA container runtime: the nvml overlay (runtimeClassName: nvidia)."
        ),
        labels=(  # what NVML adds to or corrects in the procfs facts
            "gpu.feature.node.kubernetes.io/compute-units",
            "gpu.feature.node.kubernetes.io/memory-mib",
            "gpu.feature.node.kubernetes.io/class",  # rules/gpu-class.yaml reads memory-mib
            "gpu.feature.node.kubernetes.io/mig.*",
            "gpu.feature.node.kubernetes.io/nvidia.cuda.*",
            "gpu.feature.node.kubernetes.io/virtualization",  # procfs has no virtualization mode
            # a GPU the model table does not know (hyperv-p100-vm): only NVML gives its compute
            # capability, and the family derived from it
            "gpu.feature.node.kubernetes.io/compute.*",
            "gpu.feature.node.kubernetes.io/family",
            # and the shipped rules' tier, which needs memory-mib (rules/gpu-class.yaml)
            "gpu.feature.node.kubernetes.io/class",
            # NVIDIA health signals (a lost GPU, ECC, row remapping, ...) are NVML's only
            "gpu.feature.node.kubernetes.io/health*",
            # every nvidia.com key: a GPU NVML fails for (lost) makes the nvidia profile write
            # nothing, as GFD; without NVML the driver-bound GPUs get procfs facts
            "nvidia.com/*",
        ),
    ),
}
