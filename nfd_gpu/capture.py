"""``nfd-gpu snapshot DIR``: capture what discovery reads, so ``scan --root DIR`` replays it.

One real scan runs with :meth:`HostRoot.set_recorder`. Every path it read, listed,
readlink'd or tested is then copied from the root into DIR, and nothing else:

* Path components that are symbolic links are recreated as links and followed.
  Absolute targets are rewritten relative, so DIR is self-contained.
  So the sysfs shape survives: ``sys/bus/pci/devices/<bdf>``, ``driver``, ``iommu_group``,
  ``physfn``, ``virtfnN``, ``drm``.
  Dangling links and link loops are copied as the links they are.
* Regular files are copied bounded: at most ``MAX_READ`` + 1 bytes.
  That is what a scan reads plus the byte that tells it the file was longer.
  So the truncation warning replays.
* A directory that was listed gets its entries as markers, enough for the same listing.
  A marker is an empty directory, an empty file, or the link.
* Below ``dev/``, only the entries discovery uses: ``nvidia*``, ``kfd``, ``dri/card*``,
  ``dri/renderD*``, ``vfio/*``.
  They become empty marker files with the node's permission bits.
  Device nodes are never opened; they replay as regular files.
* FIFOs, sockets and device nodes that were read become empty files: what a scan read.
* pci.ids under ``usr/share/`` is read by the pci.ids parser, not through the recorder.
  The first one found is copied whole, so product names replay.
  It is public data, at most 16 MiB.
* NVML, as ``scan --nvml auto`` asks it:
  a root that has an ``nvml.json`` gets it copied as is, a regular file of at most 4 MiB.
  Such a root is a fixture or an earlier snapshot.
  Otherwise every answer the library gave is recorded into ``nvml.json``.
  The library is ``pynvml``, or ``nvml_lib``.
  The recording goes through :mod:`nfd_gpu.discovery.nvidia.record`, also under ``--root /host``.

``SNAPSHOT.json`` lists what was captured, for a bug report: files, links, skipped paths.

Confinement:

* Every read of the root goes through :class:`HostRoot`, pci.ids and ``nvml.json`` included.
  Reads are confined to the root: a link to ``/etc/shadow`` in it is re-rooted,
  never followed out.
* Every write goes through ``_Dest``.
  DIR is created, or it is an existing empty directory that is not a link.
  Each path below it is created from DIR's descriptor, component by component,
  with ``O_NOFOLLOW``; files also get ``O_EXCL``.
  So nothing is written outside DIR, not even through a link planted in DIR during the run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from nfd_gpu import __version__
from nfd_gpu.discovery.nvidia import nvml
from nfd_gpu.discovery.nvidia import record as nvml_record
from nfd_gpu.discovery.nvidia.events import XidWatcher
from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING
from nfd_gpu.discovery.nvidia.replay import MAX_RECORDING
from nfd_gpu.discovery.pciids import MAX_PCI_IDS, PCI_IDS_PATHS
from nfd_gpu.discovery.registry import VENDORS
from nfd_gpu.discovery.runtime import dev_list
from nfd_gpu.health import HealthOptions, judge_gpus
from nfd_gpu.host import MAX_READ, HostRoot
from nfd_gpu.model import Snapshot
from nfd_gpu.scan import discover

MANIFEST = "SNAPSHOT.json"
MAX_LINK_HOPS = 40
# Listed directories whose entries are filtered: only names with these prefixes are kept.
# Below dev/: the vendors' own nodes (``Vendor.dev_list``), DRM and VFIO.
LIST_FILTERS: dict[str, tuple[str, ...]] = {
    "dev": (*dev_list(VENDORS), "dri", "vfio"),
    "dev/dri": ("card", "render"),
}
# Never copied with content: device nodes and anything below dev/ are markers only.
MARKER_ONLY = ("dev",)


class CaptureError(Exception):
    """DIR cannot be used: not empty, not a directory, or not writable."""


@dataclass
class CaptureReport:
    dest: str
    files: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    nvml: str = "none"  # recorded | copied | none
    bytes: int = 0


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class _Dest:
    """Write below DIR only.

    Every path is created component by component from DIR's descriptor.
    Directories are opened ``O_NOFOLLOW``; files are created ``O_EXCL | O_NOFOLLOW``.
    So no link, planted or copied, is ever followed by a write.
    """

    def __init__(self, dest: str) -> None:
        try:
            self.fd = os.open(dest, _DIR_FLAGS)
        except OSError as exc:
            why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
            raise CaptureError(f"{dest}: cannot be used ({why})") from None

    def close(self) -> None:
        os.close(self.fd)

    def _dir(self, rel: str) -> int:
        """A new descriptor of directory ``rel`` below DIR, created as needed."""
        fd = os.dup(self.fd)
        for name in (p for p in rel.split("/") if p):
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            finally:
                os.close(fd)
            fd = nxt
        return fd

    def mkdir(self, rel: str) -> None:
        os.close(self._dir(rel))

    def write(self, rel: str, data: bytes, mode: int = 0o644, *, replace: bool = False) -> bool:
        """Create ``rel`` with ``data``; return False when it was left as it is.

        An existing ``rel`` is left as it is. With ``replace`` it is rewritten if a regular
        file: a file copied over its marker.
        """
        parent, _, name = rel.rpartition("/")
        pfd = self._dir(parent)
        try:
            fd = os.open(name, _NEW_FILE, 0o600, dir_fd=pfd)
        except FileExistsError:
            if not replace:
                return False
            fd = os.open(name, _NEW_FILE & ~(os.O_CREAT | os.O_EXCL) | os.O_TRUNC, dir_fd=pfd)
        finally:
            os.close(pfd)
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return True

    def symlink(self, rel: str, target: str) -> bool:
        parent, _, name = rel.rpartition("/")
        pfd = self._dir(parent)
        try:
            os.symlink(target, name, dir_fd=pfd)
        except FileExistsError:
            return False
        finally:
            os.close(pfd)
        return True


class _Copier:
    """Copy what a scan read from the root into DIR.

    Reads go through :class:`HostRoot`, confined to the root; writes go through :class:`_Dest`.
    """

    def __init__(self, root: str, dest: str, report: CaptureReport) -> None:
        self.host = HostRoot(root)
        self.out = _Dest(dest)
        self.report = report
        self.done: set[tuple[str, bool]] = set()
        self.files: set[str] = set()  # report.files, for lookups (linear in files copied)

    def close(self) -> None:
        self.host.close()
        self.out.close()

    def _link(self, rel: str, target: str, parent: str) -> None:
        joined = os.path.normpath(os.path.join(parent, target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            # absolute, or climbing above the root: pointed at the same place inside DIR
            inside = "/".join(p for p in joined.split("/") if p not in ("", ".."))
            target = os.path.relpath(inside or ".", parent or ".")
        if self.out.symlink(rel, target):
            self.report.links.append(rel)

    def _marker(self, rel: str) -> None:
        # Keep the permission bits: runtime discovery reports device-node modes.
        st = self.host.stat(rel)
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o644
        if self.out.write(rel, b"", mode):
            self.report.markers.append(rel)

    def _copy_file(self, rel: str, st: os.stat_result) -> None:
        if rel.split("/", 1)[0] in MARKER_ONLY or not stat.S_ISREG(st.st_mode):
            self._marker(rel)
            return
        if st.st_nlink > 1:
            # a hard link may be any file of the same filesystem (/etc/shadow linked into a
            # tree): nothing the kernel's sysfs or procfs has, so never copied
            self.report.skipped.append(f"/{rel}: {st.st_nlink} hard links, not copied")
            return
        seen = len(self.host.warnings)
        data = self.host.read_bytes(rel, limit=MAX_READ + 1)
        if data is None:
            why = self.host.warnings[seen:] or [f"/{rel}: cannot read"]
            self.report.skipped.append(why[-1])
            return
        # its permission bits as on the host (a root-only file stays root-only), no
        # set-id or sticky bits
        self.out.write(rel, data, stat.S_IMODE(st.st_mode) & 0o777, replace=True)
        if rel not in self.files:
            self.files.add(rel)
            self.report.files.append(rel)
            self.report.bytes += len(data)

    def _entries(self, rel: str) -> None:
        """Return markers for the entries of a listed directory ``rel``, a resolved path."""
        keep = LIST_FILTERS.get(rel)
        for name in self.host.listdir(rel):
            if keep is not None and not name.startswith(keep):
                continue
            child = f"{rel}/{name}" if rel else name
            st = self.host.lstat(child)
            if st is None:
                continue
            if rel.split("/", 1)[0] in MARKER_ONLY:
                if stat.S_ISDIR(st.st_mode):
                    self.out.mkdir(child)  # dev/dri, dev/vfio: listed in turn
                else:
                    self._marker(child)
            elif stat.S_ISLNK(st.st_mode):
                target = self.host.readlink(child)
                if target is not None:
                    self._link(child, target, rel)
            elif stat.S_ISDIR(st.st_mode):
                self.out.mkdir(child)
            else:
                self._marker(child)

    def copy(self, rel: str) -> None:
        """Copy ``rel`` as the scan saw it: links on the way, then the file or directory."""
        key = (rel, True)
        if key in self.done:
            return
        self.done.add(key)
        if not self.host.lexists(rel):
            return  # the scan found nothing there; create no empty parents either
        todo = [p for p in rel.split("/") if p not in ("", ".")]
        cur = ""
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                cur = os.path.dirname(cur)
                continue
            nxt = f"{cur}/{part}" if cur else part
            st = self.host.lstat(nxt)
            if st is None:
                return  # missing (or unreadable): nothing to copy
            if stat.S_ISLNK(st.st_mode):
                target = self.host.readlink(nxt)
                if target is None:
                    return
                self._link(nxt, target, cur)
                hops += 1
                if hops > MAX_LINK_HOPS:
                    return  # a loop: the links are copied, the scan sees the same loop
                if target.startswith("/"):
                    cur = ""
                todo = [p for p in target.split("/") if p not in ("", ".")] + todo
                continue
            if stat.S_ISDIR(st.st_mode):
                self.out.mkdir(nxt)
                cur = nxt
                continue
            if not todo:
                self._copy_file(nxt, st)
            return  # a file in the middle of the path: the scan failed there too
        self._entries(cur)


def _new_dest(dest: str) -> None:
    """Return DIR, created here with its parents, or an existing empty directory, not a link."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(dest))
        os.makedirs(parent, exist_ok=True)
        os.mkdir(dest, 0o755)
        return
    if stat.S_ISLNK(st.st_mode):
        raise CaptureError(f"{dest}: a symbolic link (a snapshot needs a new directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise CaptureError(f"{dest}: exists and is not a directory")
    if os.listdir(dest):
        raise CaptureError(f"{dest}: not empty (a snapshot needs an empty or new directory)")


def capture_host(
    dest: str | os.PathLike[str],
    root: str | os.PathLike[str] = "/",
    *,
    nvml_lib: ModuleType | None = None,
    xid_seconds: float = 0.0,
) -> CaptureReport:
    """Scan ``root`` while recording, then copy what was read into ``dest``, empty or new.

    - ``nvml_lib``: the NVML library to record through; tests pass a fake ``pynvml``.
      By default ``pynvml`` when it imports, unless the root has an ``nvml.json``.
      That file is then copied.
    - ``xid_seconds``: then watch NVML's XID events that long, recorded as ``"events"``.
    """
    dest_s = os.fspath(dest)
    root_s = os.fspath(root).rstrip("/") or "/"
    inside = os.path.realpath(dest_s).startswith(os.path.realpath(root_s).rstrip("/") + "/")
    if inside and root_s != "/":
        raise CaptureError(f"{dest_s}: inside --root {root_s}")
    _new_dest(dest_s)

    paths: list[str] = []
    host = HostRoot(root_s)
    st = host.stat(NVML_RECORDING)
    has_recording = st is not None and stat.S_ISREG(st.st_mode)
    lib = nvml_lib
    if lib is None and not has_recording:
        lib = nvml.load_library()
    recording = nvml_record.wrap(lib) if lib is not None else None
    host.set_recorder(paths.append)
    snap = discover(host, nvml_lib=recording.module if recording is not None else None)
    snap = judge_gpus(snap, HealthOptions())  # health as `scan` judges it by default
    host.set_recorder(None)
    if recording is not None and xid_seconds > 0:
        _record_xids(recording.module, xid_seconds)
    host.close()

    report = CaptureReport(dest=dest_s)
    copier = _Copier(root_s, dest_s, report)
    try:
        for rel in dict.fromkeys(p.lstrip("/") for p in paths):
            if rel != NVML_RECORDING:
                copier.copy(rel)
        for rel in _peer_pci_files(copier, snap):
            copier.copy(rel)
        pci_ids = _copy_whole(copier, PCI_IDS_PATHS, MAX_PCI_IDS)
        if pci_ids is not None:
            report.files.append(pci_ids[0])
            report.bytes += pci_ids[1]
        if recording is not None and recording.data:
            copier.out.write(NVML_RECORDING, _json(recording.data))
            report.nvml = "recorded"
        elif (
            recording is None
            and has_recording
            and _copy_whole(copier, (NVML_RECORDING,), MAX_RECORDING)
        ):
            report.nvml = "copied"
        copier.out.write(MANIFEST, _json(_manifest(root_s, snap, report)))
    finally:
        copier.close()
    return report


# Files of each PCI function that the peers' sysfs readers read besides what nfd-gpu's scan
# reads (NFD's pci source: class, vendor, device, subsystem_*; GFD's nvpci: also resource
# and the config space, whose first 64 bytes any user can read), so they can judge a capture
PEER_PCI_FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device",
                  "revision", "resource", "config")  # fmt: skip
# and what GFD's nvpci reads of each NVIDIA or Mellanox function besides (go-nvlib
# nvpci.go getGPUByPciBusID): without numa_node its device list fails, without the driver
# link (a scan reads the driver from uevent) it finds no GPU bound to vfio-pci
GFD_PCI_FILES = ("numa_node", "driver", "iommu_group", "physfn", "sriov_totalvfs",
                 "sriov_numvfs")  # fmt: skip
GFD_PCI_VENDORS = ("10de", "15b3")


def _peer_pci_files(copier: _Copier, snap: Snapshot) -> list[str]:
    devices = "sys/bus/pci/devices"
    gfd = {d.address for d in snap.pci if d.vendor in GFD_PCI_VENDORS}
    return [
        f"{devices}/{n}/{f}"
        for n in copier.host.listdir(devices)
        for f in PEER_PCI_FILES + (GFD_PCI_FILES if n in gfd else ())
    ]


def _copy_whole(copier: _Copier, candidates: tuple[str, ...], limit: int) -> tuple[str, int] | None:
    """Copy the first of ``candidates`` the root has as a regular file; return its path and size.

    - It is read through HostRoot, confined, at most ``limit`` bytes.
    - It is written as a regular file.
    - Used for pci.ids, public data, so product names replay; and for an NVML recording.
    - Return None when the root has none.
    """
    host, report = copier.host, copier.report
    for rel in candidates:
        st = host.stat(rel)
        if st is None or not stat.S_ISREG(st.st_mode):
            continue
        seen = len(host.warnings)
        data = host.read_bytes(rel, limit=limit)
        if data is None:
            report.skipped.extend(host.warnings[seen:] or [f"/{rel}: cannot read"])
            continue
        try:
            copier.out.write(rel, data)
        except OSError as exc:
            report.skipped.append(f"/{rel}: cannot write ({exc.strerror})")
            continue
        return rel, len(data)
    return None


def _record_xids(lib: ModuleType, seconds: float) -> None:
    """Watch the XID events NVML delivers within ``seconds``; the recorder keeps them."""
    watcher = XidWatcher(lib)
    if not watcher.open():
        return
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            watcher.poll(max(1, min(1000, int(left * 1000))))
    finally:
        watcher.close()


def _manifest(root: str, snap: Snapshot, report: CaptureReport) -> dict[str, Any]:
    return {
        "nfd_gpu_version": __version__,
        "root": root,
        "gpus": [g.address for g in snap.gpus],
        "nvml": report.nvml,
        "files": sorted(report.files),
        "links": sorted(report.links),
        "markers": sorted(report.markers),
        "skipped": report.skipped,
        "bytes": report.bytes,
        "scan_warnings": list(snap.warnings),
    }


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()
