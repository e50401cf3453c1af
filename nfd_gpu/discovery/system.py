"""Host facts around the GPUs: loaded kernel modules, module versions, DMI machine name."""

from __future__ import annotations

from nfd_gpu.hostroot import HostRoot

# Kernel modules whose version is reported (``sys/module/<name>/version``).
GPU_MODULES = ("nvidia", "amdgpu", "i915", "xe", "gim")


def loaded_modules(host: HostRoot) -> tuple[str, ...]:
    """Names of loaded modules from ``proc/modules`` (as NFD's kernel source reads them)."""
    text = host.read_text("proc/modules")
    if not text:
        return ()
    names = set()
    for line in text.splitlines():
        name = line.split(" ", 1)[0].strip()
        if name and name.replace("_", "").replace("-", "").isalnum():
            names.add(name)
    return tuple(sorted(names))


def module_versions(host: HostRoot, modules: tuple[str, ...] = GPU_MODULES) -> dict[str, str]:
    """``sys/module/<m>/version`` for the GPU driver modules that have one."""
    out = {}
    for m in modules:
        v = host.read_text(f"sys/module/{m}/version")
        if v:
            token = v.split()[0]
            if all(c.isalnum() or c in "._-+" for c in token):
                out[m] = token
            else:
                host.warn(f"/sys/module/{m}/version: unexpected content {v[:40]!r}")
    return out


def machine(host: HostRoot) -> str | None:
    """DMI product name (``sys/class/dmi/id/product_name``), as GFD's gpu.machine."""
    v = host.read_text("sys/class/dmi/id/product_name")
    return v or None
