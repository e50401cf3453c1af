"""``nfd-gpu snapshot DIR``: capture what discovery reads, so ``scan --root DIR`` replays it.

One real scan runs with :meth:`HostRoot.set_recorder`; every path it read, listed,
readlink'd or tested is then copied from the root into DIR, and nothing else:

* path components that are symbolic links are recreated as links (absolute targets
  rewritten relative, so DIR is self-contained) and followed, so the sysfs shape
  (``sys/bus/pci/devices/<bdf>``, ``driver``, ``iommu_group``, ``physfn``, ``virtfnN``,
  ``drm``) survives; dangling links and link loops are copied as the links they are;
* regular files are copied bounded: at most ``MAX_READ`` + 1 bytes, i.e. what a scan reads
  plus the byte that tells it the file was longer (so the truncation warning replays);
* a directory that was listed gets its entries as markers (an empty directory, an empty
  file, or the link), enough for the same listing; below ``dev/`` only the entries
  discovery uses (``nvidia*``, ``kfd``, ``dri/card*``, ``dri/renderD*``, ``vfio/*``), all
  as empty marker files with the node's permission bits (device nodes are never opened;
  they replay as regular files);
* FIFOs, sockets and device nodes that were read become empty files (what a scan read);
* pci.ids (``usr/share/...``) is read by the pci.ids parser, not through the recorder: the
  first one found is copied whole (public data, at most 16 MiB) so product names replay;
* NVML: as ``scan --nvml auto`` asks it: a root that has an ``nvml.json`` (a fixture, an
  earlier snapshot) gets it copied as is (a regular file, at most 4 MiB); otherwise every
  answer the library (``pynvml``, or ``nvml_lib``) gave is recorded through
  :mod:`nfd_gpu.discovery.nvidia.record` into ``nvml.json`` (also under ``--root /host``).

``SNAPSHOT.json`` lists what was captured (files, links, skipped paths) for a bug report.
Nothing is written outside DIR, and DIR must be empty (or missing).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from nfd_gpu import __version__
from nfd_gpu.discovery.nvidia import nvml
from nfd_gpu.discovery.nvidia import record as nvml_record
from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING
from nfd_gpu.discovery.nvidia.replay import MAX_RECORDING
from nfd_gpu.discovery.pciids import MAX_PCI_IDS, PCI_IDS_PATHS
from nfd_gpu.hostroot import _FLAGS, MAX_READ, HostRoot
from nfd_gpu.model import Snapshot
from nfd_gpu.scan import discover

MANIFEST = "SNAPSHOT.json"
MAX_LINK_HOPS = 40
# Listed directories whose entries are filtered: only names with these prefixes are kept.
LIST_FILTERS: dict[str, tuple[str, ...]] = {
    "dev": ("nvidia", "kfd", "dri", "vfio"),
    "dev/dri": ("card", "render"),
}
# Never copied with content: device nodes and anything below dev/ are markers only.
MARKER_ONLY = ("dev",)


class SnapshotError(Exception):
    """DIR cannot be used (not empty, not a directory, not writable)."""


@dataclass
class SnapshotReport:
    dest: str
    files: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    nvml: str = "none"  # recorded | copied | none
    bytes: int = 0


class _Copier:
    def __init__(self, root: str, dest: str, report: SnapshotReport) -> None:
        self.src_root = root.rstrip("/") or "/"
        self.dest = dest
        self.report = report
        self.done: set[tuple[str, bool]] = set()

    def src(self, rel: str) -> str:
        return os.path.join(self.src_root, rel) if rel else self.src_root

    def dst(self, rel: str) -> str:
        return os.path.join(self.dest, rel) if rel else self.dest

    def _mkdir(self, rel: str) -> None:
        if rel:
            os.makedirs(self.dst(rel), exist_ok=True)

    def _link(self, rel: str, target: str, parent: str) -> None:
        joined = os.path.normpath(os.path.join(parent, target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            # absolute, or climbing above the root: pointed at the same place inside DIR
            inside = "/".join(p for p in joined.split("/") if p not in ("", ".."))
            target = os.path.relpath(inside or ".", parent or ".")
        d = self.dst(rel)
        if os.path.lexists(d):
            return
        self._mkdir(parent)
        os.symlink(target, d)
        self.report.links.append(rel)

    def _marker(self, rel: str, parent: str) -> None:
        d = self.dst(rel)
        if os.path.lexists(d):
            return
        self._mkdir(parent)
        with open(d, "wb"):
            pass
        # Keep the permission bits: runtime discovery reports device-node modes.
        with contextlib.suppress(OSError):
            os.chmod(d, stat.S_IMODE(os.stat(self.src(rel)).st_mode))
        self.report.markers.append(rel)

    def _copy_file(self, rel: str, parent: str, st: os.stat_result) -> None:
        if rel.split("/", 1)[0] in MARKER_ONLY or not stat.S_ISREG(st.st_mode):
            self._marker(rel, parent)
            return
        try:
            fd = os.open(self.src(rel), _FLAGS)
            try:
                data = os.read(fd, MAX_READ + 1)
            finally:
                os.close(fd)
        except OSError as exc:
            self.report.skipped.append(f"/{rel}: {exc.strerror or exc}")
            return
        self._mkdir(parent)
        with open(self.dst(rel), "wb") as f:
            f.write(data)
        if rel not in self.report.files:
            self.report.files.append(rel)
            self.report.bytes += len(data)

    def _entries(self, rel: str) -> None:
        """Markers for the entries of a listed directory ``rel`` (a resolved path)."""
        try:
            names = sorted(os.listdir(self.src(rel)))
        except OSError:
            return
        keep = LIST_FILTERS.get(rel)
        for name in names:
            if keep is not None and not name.startswith(keep):
                continue
            child = f"{rel}/{name}" if rel else name
            try:
                st = os.lstat(self.src(child))
            except OSError:
                continue
            if rel.split("/", 1)[0] in MARKER_ONLY:
                if stat.S_ISDIR(st.st_mode):
                    self._mkdir(child)  # dev/dri, dev/vfio: listed in turn
                else:
                    self._marker(child, rel)
            elif stat.S_ISLNK(st.st_mode):
                self._link(child, os.readlink(self.src(child)), rel)
            elif stat.S_ISDIR(st.st_mode):
                self._mkdir(child)
            else:
                self._marker(child, rel)

    def copy(self, rel: str) -> None:
        """Copy ``rel`` as the scan saw it: links on the way, then the file or directory."""
        key = (rel, True)
        if key in self.done:
            return
        self.done.add(key)
        if not os.path.lexists(self.src(rel)):
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
            try:
                st = os.lstat(self.src(nxt))
            except OSError:
                return  # missing (or unreadable): nothing to copy
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(self.src(nxt))
                except OSError:
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
                self._mkdir(nxt)
                cur = nxt
                continue
            if not todo:
                self._copy_file(nxt, cur, st)
            return  # a file in the middle of the path: the scan failed there too
        self._entries(cur)


def _check_dest(dest: str) -> None:
    if os.path.lexists(dest) and not os.path.isdir(dest):
        raise SnapshotError(f"{dest}: exists and is not a directory")
    if os.path.isdir(dest) and os.listdir(dest):
        raise SnapshotError(f"{dest}: not empty (a snapshot needs an empty or new directory)")


def take_snapshot(
    dest: str | os.PathLike[str],
    root: str | os.PathLike[str] = "/",
    *,
    nvml_lib: ModuleType | None = None,
) -> SnapshotReport:
    """Scan ``root`` while recording, then copy what was read into ``dest`` (empty or new).

    ``nvml_lib``: the NVML library to record through (tests pass a fake ``pynvml``); by
    default ``pynvml`` when it imports, unless the root has an ``nvml.json`` (copied).
    """
    dest_s = os.fspath(dest)
    root_s = os.fspath(root).rstrip("/") or "/"
    _check_dest(dest_s)
    inside = os.path.realpath(dest_s).startswith(os.path.realpath(root_s).rstrip("/") + "/")
    if inside and root_s != "/":
        raise SnapshotError(f"{dest_s}: inside --root {root_s}")
    os.makedirs(dest_s, exist_ok=True)

    lib = nvml_lib
    has_recording = os.path.isfile(os.path.join(root_s, NVML_RECORDING))
    if lib is None and not has_recording:
        lib = nvml.load_library()
    recording = nvml_record.wrap(lib) if lib is not None else None

    paths: list[str] = []
    host = HostRoot(root_s)
    host.set_recorder(paths.append)
    snap = discover(host, nvml_lib=recording.module if recording is not None else None)
    host.set_recorder(None)

    report = SnapshotReport(dest=dest_s)
    copier = _Copier(root_s, dest_s, report)
    for rel in dict.fromkeys(p.lstrip("/") for p in paths):
        if rel == NVML_RECORDING:
            continue
        copier.copy(rel)
    for rel in _peer_pci_files(copier):
        copier.copy(rel)
    _copy_pci_ids(copier, report)

    nvml_path = copier.dst(NVML_RECORDING)
    if recording is not None and recording.data:
        _write_json(nvml_path, recording.data)
        report.nvml = "recorded"
    elif recording is None and has_recording:
        with open(copier.src(NVML_RECORDING), "rb") as f:
            data = f.read(MAX_RECORDING)
        with open(nvml_path, "wb") as out:
            out.write(data)
        report.nvml = "copied"

    _write_json(copier.dst(MANIFEST), _manifest(root_s, snap, report))
    return report


# Files of each PCI function that the peers' sysfs readers read besides what nfd-gpu's scan
# reads (NFD's pci source: class, vendor, device, subsystem_*; GFD's nvpci: also resource
# and the config space, whose first 64 bytes any user can read), so they can judge a capture
PEER_PCI_FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device",
                  "revision", "resource", "config")  # fmt: skip


def _peer_pci_files(copier: _Copier) -> list[str]:
    devices = "sys/bus/pci/devices"
    try:
        names = sorted(os.listdir(copier.src(devices)))
    except OSError:
        return []
    return [f"{devices}/{n}/{f}" for n in names for f in PEER_PCI_FILES]


def _copy_pci_ids(copier: _Copier, report: SnapshotReport) -> None:
    """The first pci.ids database the root has (bounded read), for offline names."""
    for rel in PCI_IDS_PATHS:
        src = copier.src(rel)
        if os.path.isfile(src):
            try:
                with open(src, "rb") as f:
                    data = f.read(MAX_PCI_IDS)
            except OSError as exc:
                report.skipped.append(f"/{rel}: {exc.strerror}")
                continue
            os.makedirs(os.path.dirname(copier.dst(rel)), exist_ok=True)
            with open(copier.dst(rel), "wb") as out:
                out.write(data)
            report.files.append(rel)
            report.bytes += len(data)
            break


def _manifest(root: str, snap: Snapshot, report: SnapshotReport) -> dict[str, Any]:
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


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
