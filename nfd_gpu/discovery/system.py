"""Host facts around the GPUs: loaded kernel modules, module versions, DMI machine name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from nfd_gpu.discovery.source import Context, Source, Vendor
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Snapshot


def gpu_modules(vendors: Iterable[Vendor]) -> tuple[str, ...]:
    """The vendors' kernel modules, whose version is reported (``sys/module/<name>/version``)."""
    return tuple(m for v in vendors for m in v.modules)


def loaded_modules(host: HostRoot) -> tuple[str, ...]:
    """Names of loaded modules: ``proc/modules`` (as NFD's kernel source reads it).

    Where that file is not there (a pod mounts ``/proc/driver`` and ``/sys`` only; a kernel
    without module support has none), the loadable modules whose ``sys/module/<name>/initstate``
    is ``live`` (Documentation/ABI/testing/sysfs-module): the same set."""
    text = host.read_text("proc/modules")
    if text is None:
        lines = [m for m in host.listdir("sys/module") if _live(host, m)]
    else:
        lines = text.splitlines()
    names = set()
    for line in lines:
        name = line.split(" ", 1)[0].strip()
        if name and name.replace("_", "").replace("-", "").isalnum():
            names.add(name)
    return tuple(sorted(names))


def _live(host: HostRoot, module: str) -> bool:
    return (host.read_text(f"sys/module/{module}/initstate") or "").strip() == "live"


def builtin_modules(
    host: HostRoot, gpu_modules: tuple[str, ...], loaded: Iterable[str] | None = None
) -> tuple[str, ...]:
    """Modules built into the kernel (Talos builds i915/xe in: no ``proc/modules`` line).

    ``lib/modules/<proc/sys/kernel/osrelease>/modules.builtin`` (``.ko`` paths, as NFD's
    ``kernel.enabledmodule``), plus the GPU driver modules that have a ``sys/module/<name>``
    directory without a ``proc/modules`` entry (built in, kernel without that file).
    ``loaded``: :func:`loaded_modules`, when already read."""
    names: set[str] = set()
    release = (host.read_text("proc/sys/kernel/osrelease") or "").strip()
    if release and "/" not in release and not release.startswith("."):
        for line in (host.read_text(f"lib/modules/{release}/modules.builtin") or "").splitlines():
            line = line.strip()
            if line.endswith(".ko"):
                name = line.rsplit("/", 1)[-1][: -len(".ko")]
                if name and name.replace("_", "").replace("-", "").isalnum():
                    names.add(name)
    have = set(loaded_modules(host) if loaded is None else loaded)
    names.update(m for m in gpu_modules if m not in have and host.exists(f"sys/module/{m}"))
    return tuple(sorted(names - have))


def module_versions(
    host: HostRoot, modules: tuple[str, ...], attr: str = "version"
) -> dict[str, str]:
    """``sys/module/<m>/<attr>`` for the GPU driver modules that have one: ``version``
    (``MODULE_VERSION``), or ``srcversion`` (modpost's checksum of the module's sources,
    which AMD's labeller writes as ``amd.com/gpu.driver-src-version``)."""
    out = {}
    for m in modules:
        v = host.read_text(f"sys/module/{m}/{attr}")
        if v:
            token = v.split()[0]
            if all(c.isalnum() or c in "._-+" for c in token):
                out[m] = token
            else:
                host.warn(f"/sys/module/{m}/{attr}: unexpected content {v[:40]!r}")
    return out


def machine(host: HostRoot) -> str | None:
    """DMI product name (``sys/class/dmi/id/product_name``), as GFD's gpu.machine."""
    v = host.read_text("sys/class/dmi/id/product_name")
    return v or None


def versions(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """The ``module-versions`` source: early, the vendor sources add to the versions."""
    modules = gpu_modules(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        return dataclasses.replace(
            snap,
            driver_versions=module_versions(ctx.host, modules),
            driver_src_versions=module_versions(ctx.host, modules, "srcversion"),
        )

    return Source("module-versions", run)


def vendor_versions(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """The ``driver-versions`` source, after the vendor sources (NVIDIA's fills its module's
    version from NVML when sysfs has none): the driver version of each vendor with GPUs
    here, that of the first of its ``Vendor.drivers`` with a module version."""
    vendors = tuple(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        present = {g.vendor for g in snap.gpus}
        modules = snap.driver_versions
        found = {}
        for v in vendors:
            version = next((modules[d] for d in v.drivers if modules.get(d)), None)
            if v.name in present and version:
                found[v.name] = version
        return dataclasses.replace(snap, vendor_driver_versions=found)

    return Source("driver-versions", run)


def source(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """The ``system`` source: loaded and built-in modules, the machine name."""
    modules = gpu_modules(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        loaded = loaded_modules(ctx.host)
        return dataclasses.replace(
            snap,
            loaded_modules=loaded,
            builtin_modules=builtin_modules(ctx.host, modules, loaded),
            machine=machine(ctx.host),
        )

    return Source("system", run)
