"""Host facts around the GPUs: loaded kernel modules, module versions, DMI machine name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nfd_gpu.discovery.source import Context, Source, Vendor
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Snapshot
from nfd_gpu.record import replace


def gpu_modules(vendors: Iterable[Vendor]) -> tuple[str, ...]:
    """Return the vendors' kernel modules, whose version is reported: ``sys/module/<m>/version``."""
    return tuple(m for v in vendors for m in v.modules)


def loaded_modules(host: HostRoot) -> tuple[str, ...]:
    """Return the names of loaded modules: ``proc/modules``, as NFD's kernel source reads it.

    - Without that file, the loadable modules whose ``sys/module/<name>/initstate`` is
      ``live``: the same set. See Documentation/ABI/testing/sysfs-module.
    - The file is missing when a pod mounts ``/proc/driver`` and ``/sys`` only,
      and on a kernel without module support.
    """
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
    """Return the modules built into the kernel.

    Talos builds i915 and xe in: no ``proc/modules`` line.

    - ``lib/modules/<proc/sys/kernel/osrelease>/modules.builtin``: ``.ko`` paths,
      as NFD's ``kernel.enabledmodule`` reads them.
    - Plus the GPU driver modules that have a ``sys/module/<name>`` directory without a
      ``proc/modules`` entry: built in, or a kernel without that file.
    - ``loaded``: :func:`loaded_modules`, when already read.
    """
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
    """Return ``sys/module/<m>/<attr>`` for the GPU driver modules that have one.

    - ``version`` is ``MODULE_VERSION``.
    - Else ``srcversion``: modpost's checksum of the module's sources.
      AMD's labeller writes it as ``amd.com/gpu.driver-src-version``.
    """
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
    """Return the DMI product name, ``sys/class/dmi/id/product_name``, as GFD's gpu.machine."""
    v = host.read_text("sys/class/dmi/id/product_name")
    return v or None


def versions(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """Return the ``module-versions`` source; it runs early, the vendor sources add to it."""
    modules = gpu_modules(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        return replace(
            snap,
            driver_versions=module_versions(ctx.host, modules),
            driver_src_versions=module_versions(ctx.host, modules, "srcversion"),
        )

    return Source("module-versions", run)


def vendor_versions(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """Return the ``driver-versions`` source, run after the vendor sources.

    - It gives the driver version of each vendor with GPUs here.
    - That is the version of the first of its ``Vendor.drivers`` with a module version.
    - It runs last because NVIDIA's source fills its module's version from NVML when sysfs
      has none.
    """
    vendors = tuple(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        present = {g.vendor for g in snap.gpus}
        modules = snap.driver_versions
        found = {}
        for v in vendors:
            version = next((modules[d] for d in v.drivers if modules.get(d)), None)
            if v.name in present and version:
                found[v.name] = version
        return replace(snap, vendor_driver_versions=found)

    return Source("driver-versions", run)


def source(gpu_vendors: Mapping[str, Vendor]) -> Source:
    """Return the ``system`` source: loaded and built-in modules, the machine name."""
    modules = gpu_modules(gpu_vendors.values())

    def run(ctx: Context, snap: Snapshot) -> Snapshot:
        loaded = loaded_modules(ctx.host)
        return replace(
            snap,
            loaded_modules=loaded,
            builtin_modules=builtin_modules(ctx.host, modules, loaded),
            machine=machine(ctx.host),
        )

    return Source("system", run)
