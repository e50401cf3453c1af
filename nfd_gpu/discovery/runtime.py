"""Runtime facts: can containers reach the GPUs, and with which software?

Read under the host root. All of it is optional; nothing is executed.

* Device nodes ``dev/nvidia*``, ``dev/dri/{card,renderD}*``, ``dev/kfd``, ``dev/vfio/*``:
  existence and permission bits, by ``stat``.
  In test fixtures regular files stand in for the character devices.
  Git keeps no device nodes and only 0644/0755 modes. So ``char_device`` is false there.
* NVIDIA container toolkit: ``etc/nvidia-container-runtime/config.toml``, and the
  ``nvidia-container-runtime`` and ``nvidia-ctk`` binaries under ``usr/bin``.
* CDI specs in ``etc/cdi`` and ``var/run/cdi``: ``*.yaml``, ``*.yml``, ``*.json``.
  The ``kind`` each declares, such as ``nvidia.com/gpu``, is read without a YAML parser.
  It comes from a ``kind:`` line or a JSON ``"kind"`` member.
* ROCm: ``opt/rocm/.info/version``.
* OpenCL ICDs: ``etc/OpenCL/vendors/*.icd``.
* Level Zero loader: ``libze_loader.so.1`` or ``libze_loader.so`` in the usual library
  directories. It is looked up by name: a directory listing would record hundreds of names.

``devices_ready`` is true when every GPU's device nodes exist:

- for a GPU used by containers, its ``renderD`` node;
  AMD also needs ``dev/kfd``;
  NVIDIA needs ``dev/nvidiactl`` and one ``dev/nvidia<N>`` per GPU;
- for a GPU or VF passed through, its ``dev/vfio/<iommu group>``;
- it is None when no GPU has nodes to check.

Without ``dev/`` under the root, the nodes the kernel creates in devtmpfs are derived from sysfs.
The DaemonSet does not mount the host's ``/dev``: see docs/install.md.

- ``dev/dri/<name>`` for each ``card<N>`` or ``renderD<N>`` in ``sys/class/drm``.
  That is the DRM device name, devnode ``dri/<name>``.
- ``dev/kfd`` for ``sys/class/kfd/kfd``.
- ``dev/vfio/<group>`` for the IOMMU group of each device bound to a VFIO driver:
  ``vfio-pci`` or ``*_vfio_pci``. The driver registers the group, devnode ``vfio/<group>``.
- Their mode is unknown: ``None``.
- ``nvidia-modprobe`` makes ``dev/nvidia*`` with ``mknod``; they leave no trace in sysfs.
  Without ``dev/`` they are unknown.
  So is ``devices_ready`` on a node with NVIDIA GPUs in container mode.

What each vendor's containers need is its ``Vendor``'s to say, in discovery/source.py:
``dev_list``, ``dev_needs``, ``dev_per_gpu``, ``render_node``, ``dev_in_sysfs``.
"""

from __future__ import annotations

import re
import stat

from nfd_gpu.discovery.passthrough import is_vfio_driver
from nfd_gpu.discovery.source import Context, Source, Vendor
from nfd_gpu.host import HostRoot
from nfd_gpu.model import DeviceNode, Gpu, PciDevice, Runtime, Snapshot
from nfd_gpu.record import replace

NVIDIA_TOOLKIT_CONFIG = "etc/nvidia-container-runtime/config.toml"
NVIDIA_BINARIES = ("usr/bin/nvidia-container-runtime", "usr/bin/nvidia-ctk")
CDI_DIRS = ("etc/cdi", "var/run/cdi")
ROCM_VERSION = "opt/rocm/.info/version"
OPENCL_VENDORS = "etc/OpenCL/vendors"
LIB_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "usr/local/lib",
)
LEVEL_ZERO_LOADER = ("libze_loader.so.1", "libze_loader.so")
_KIND = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_YAML_KIND = re.compile(r"""^kind\s*:\s*["']?([^"'\s#]+)["']?\s*(#.*)?$""")


def parse_cdi_kind(text: str | None) -> str | None:
    """Return the ``kind`` of a CDI spec, ``vendor.com/class``; None when absent or invalid."""
    if not text:
        return None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        import json  # lazy: only a JSON spec needs it

        try:
            doc = json.loads(stripped)
        except ValueError:
            return None
        kind = doc.get("kind") if isinstance(doc, dict) else None
        return kind if isinstance(kind, str) and _KIND.match(kind) else None
    for line in text.splitlines():
        m = _YAML_KIND.match(line)  # top level only: no indentation
        if m:
            return m.group(1) if _KIND.match(m.group(1)) else None
    return None


def parse_rocm_version(text: str | None) -> str | None:
    """Parse ``opt/rocm/.info/version``: ``6.2.0-66`` -> ``6.2.0``; None when not a version."""
    if not text or not text.strip():
        return None
    token = text.split()[0].split("-", 1)[0]
    parts = token.split(".")
    if len(parts) < 2 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return token


_DRM_NODE = re.compile(r"^(card|renderD)[0-9]+$")


def _stat(host: HostRoot, rel: str) -> DeviceNode | None:
    st = host.stat(rel)
    if st is None:
        return None
    return DeviceNode(
        path=rel, mode=f"{stat.S_IMODE(st.st_mode):04o}", char_device=stat.S_ISCHR(st.st_mode)
    )


def dev_list(vendors: tuple[Vendor, ...]) -> tuple[str, ...]:
    """Return the prefixes of the vendors' nodes directly under dev/: ``Vendor.dev_list``."""
    return tuple(p for v in vendors for p in v.dev_list)


def device_nodes(host: HostRoot, vendors: tuple[Vendor, ...]) -> tuple[DeviceNode, ...]:
    own = dev_list(vendors)
    names = [f"dev/{n}" for n in host.listdir("dev") if own and n.startswith(own)]
    names += [f"dev/dri/{n}" for n in host.listdir("dev/dri") if n.startswith(("card", "render"))]
    names += [f"dev/vfio/{n}" for n in host.listdir("dev/vfio")]
    return tuple(n for n in (_stat(host, p) for p in sorted(names)) if n is not None)


def _iommu_group(host: HostRoot, address: str, read: dict[str, str | None]) -> str | None:
    """Return the IOMMU group of a function pci.py read without it: a host-side VF.

    It is read once per scan: ``read`` holds the groups already read.
    """
    if address not in read:
        read[address] = host.readlink_name(f"sys/bus/pci/devices/{address}/iommu_group")
    return read[address]


def derived_device_nodes(
    host: HostRoot,
    pci: tuple[PciDevice, ...],
    vendors: tuple[Vendor, ...],
    read: dict[str, str | None] | None = None,
) -> tuple[DeviceNode, ...]:
    """Return the devtmpfs nodes of DRM, KFD and VFIO groups, named from sysfs.

    - Used when there is no ``dev/``. KFD stands for the vendors' own nodes.
    - ``read``: the IOMMU groups read so far. See :func:`_iommu_group`.
    """
    read = {} if read is None else read
    names = [f"dev/dri/{n}" for n in host.listdir("sys/class/drm") if _DRM_NODE.match(n)]
    for v in vendors:
        if v.dev_in_sysfs:
            names += [f"dev/{n}" for n in v.dev_needs if host.is_dir(f"sys/class/{n}/{n}")]
    for d in pci:
        if is_vfio_driver(d.driver):
            group = d.iommu_group or _iommu_group(host, d.address, read)
            if group:
                names.append(f"dev/vfio/{group}")
    return tuple(DeviceNode(path=p, mode=None) for p in sorted(set(names)))


def cdi_kinds(host: HostRoot) -> tuple[str, ...]:
    kinds = set()
    for d in CDI_DIRS:
        for name in host.listdir(d):
            if name.endswith((".yaml", ".yml", ".json")):
                kind = parse_cdi_kind(host.read_text(f"{d}/{name}"))
                if kind:
                    kinds.add(kind)
                else:
                    host.warn(f"/{d}/{name}: no CDI kind found")
    return tuple(sorted(kinds))


def opencl_icds(host: HostRoot) -> tuple[str, ...]:
    return tuple(n[: -len(".icd")] for n in host.listdir(OPENCL_VENDORS) if n.endswith(".icd"))


def level_zero(host: HostRoot) -> bool:
    """Find the loader by its names, never by a listing of whole library directories."""
    return any(host.exists(f"{d}/{n}") for d in LIB_DIRS for n in LEVEL_ZERO_LOADER)


def required_nodes(
    gpus: tuple[Gpu, ...],
    pci: tuple[PciDevice, ...],
    vendors: tuple[Vendor, ...],
    host: HostRoot | None = None,
    read: dict[str, str | None] | None = None,
) -> list[list[str]]:
    """Return, per GPU, the device nodes containers or VMs need; empty: nothing to check.

    - Host-side VFs are read without their IOMMU group: pci.py keeps them cheap.
      So ``host`` supplies it for the VFs of a ``vf-passthrough`` GPU.
    - ``read``: the groups read so far. See :func:`_iommu_group`.
    """
    read = {} if read is None else read
    groups = {d.address: d.iommu_group for d in pci if d.iommu_group}
    if host is not None:
        for g in gpus:
            for v in g.vfs:
                if v not in groups:
                    grp = _iommu_group(host, v, read)
                    if grp:
                        groups[v] = grp
    by_name = {v.name: v for v in vendors}
    out: list[list[str]] = []
    for g in gpus:
        need: list[str] = []
        render = [f"dev/dri/{n}" for n in g.drm if n.startswith("renderD")]
        vendor = by_name.get(g.vendor)
        if g.mode == "container":
            if vendor is None or vendor.render_node:
                # no render node in sysfs: the driver is not ready, the check must fail
                need += render or [f"dev/dri/<no render node for {g.address}>"]
            need += [f"dev/{n}" for n in vendor.dev_needs] if vendor else []
        elif g.mode == "pf-passthrough":
            need.append(f"dev/vfio/{groups.get(g.address, '<no iommu group>')}")
        elif g.mode == "vf-passthrough":
            need += [f"dev/vfio/{groups.get(v, '<no iommu group>')}" for v in g.vfs]
        out.append(need)
    return out


def _per_gpu_nodes_present(
    gpus: tuple[Gpu, ...], vendors: tuple[Vendor, ...], present: set[str]
) -> bool:
    """Tell whether each vendor with one node per GPU has enough nodes.

    Those vendors set ``Vendor.dev_per_gpu``. Each needs at least as many
    ``dev/<prefix><N>`` as GPUs in containers.
    """
    for v in vendors:
        if v.dev_per_gpu:
            minor = re.compile(rf"^dev/{re.escape(v.dev_per_gpu)}[0-9]+$")
            wanted = sum(1 for g in gpus if g.vendor == v.name and g.mode == "container")
            if sum(1 for p in present if minor.match(p)) < wanted:
                return False
    return True


def discover(
    host: HostRoot, gpus: tuple[Gpu, ...], pci: tuple[PciDevice, ...], vendors: tuple[Vendor, ...]
) -> Runtime:
    visible = host.is_dir("dev")
    read: dict[str, str | None] = {}  # VF IOMMU groups: each link read once
    nodes = (
        device_nodes(host, vendors) if visible else derived_device_nodes(host, pci, vendors, read)
    )
    ready: bool | None = None
    present = {n.path for n in nodes}
    needs = required_nodes(gpus, pci, vendors, host, read)
    # a vendor's mknod-made nodes (dev_in_sysfs False) cannot be derived without dev/
    hidden = {v.name for v in vendors if not v.dev_in_sysfs}
    unknowable = any(g.vendor in hidden and g.mode == "container" for g in gpus)
    if any(needs) and (visible or not unknowable):
        ready = all(p in present for need in needs for p in need) and _per_gpu_nodes_present(
            gpus, vendors, present
        )
    return Runtime(
        dev_visible=visible,
        device_nodes=nodes,
        nvidia_toolkit_config=host.exists(NVIDIA_TOOLKIT_CONFIG),
        nvidia_runtime_binary=any(host.exists(b) for b in NVIDIA_BINARIES),
        cdi_kinds=cdi_kinds(host),
        rocm_version=parse_rocm_version(host.read_text(ROCM_VERSION)),
        opencl_icds=opencl_icds(host),
        level_zero=level_zero(host),
        devices_ready=ready,
    )


def source(vendors: dict[str, Vendor]) -> Source:
    """Return the runtime step for these vendors, given by PCI id: their device nodes."""
    known = tuple(vendors.values())

    def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
        return replace(snap, runtime=discover(ctx.host, snap.gpus, snap.pci, known))

    return Source("runtime", _discover)
