"""GFD's vGPU labeler: ``vgpu.*`` from the PCI vendor capability of the NVIDIA PCI functions.

GFD's is ``internal/lm/vgpu.go``.
"""

from __future__ import annotations

from nfd_gpu.model import Gpu


def vgpu_labels(gpus: list[Gpu]) -> dict[str, str] | None:
    """Return ``vgpu.*`` as GFD's vGPU labeler writes them, in ``internal/lm/vgpu.go``.

    They come from the PCI vendor capability of the NVIDIA GPUs.
    ``gpus`` are all of them, any driver, as GFD lists every NVIDIA PCI function.

    Where every NVIDIA function's whole config space was read:

    - ``vgpu.present`` is ``true`` when a GPU carries the vGPU capability, else ``false``;
    - host driver version and branch come from the capability, the last vGPU winning;
    - a vGPU capability without its host driver record fails GFD's labelling pass.
      Then the result is None: no ``nvidia.com`` label.

    Where a config space is short, GFD writes no ``vgpu.*`` label.
    An unprivileged reader gets 64 bytes.
    nfd-gpu writes none either, except ``vgpu.present=true`` when NVML reports a vGPU guest.
    That is virtualization mode VGPU. It is the value GFD writes when it can read the capability.
    """
    out: dict[str, str] = {}
    if gpus and all(g.nvidia.vgpu_capability is not None for g in gpus):
        guests = [g for g in gpus if g.nvidia.vgpu_capability and g.mode == "vgpu-guest"]
        out["vgpu.present"] = "true" if guests else "false"
        for g in guests:
            if g.nvidia.vgpu_host_driver_version is None:
                return None
            out["vgpu.host-driver-version"] = g.nvidia.vgpu_host_driver_version
            out["vgpu.host-driver-branch"] = g.nvidia.vgpu_host_driver_branch or ""
    elif any(g.mode == "vgpu-guest" for g in gpus):
        out["vgpu.present"] = "true"
    return out
