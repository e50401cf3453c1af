#!/usr/bin/env python3
"""Scan benchmark: nfd-gpu beside its peers on the same synthetic sysfs trees.

Builds host roots in the real sysfs shape (tests/fixtures/specs/common.py) of 27 PCI
functions (the HGX H100 fixture's spec: 8 GPUs, 4 NVSwitches), 4,096 and 16,384 (16 AMD
GPUs with 63 SR-IOV VFs each, NICs with 127 VFs each, PCIe bridges; a config header per
function), then times, interleaved in rounds (benchmarks/rounds.py: every contender once
per round, order rotated; CPU and wall time; medians, p10-p90, per-round ratios to lspci):

* nfd-gpu's scan in-process (``run_scan``: discovery, snapshot, labels, features), as the
  agent and ``scan`` run it, and with the IOMMU attributes of NFD's ``pci.device`` (read
  when rules are given),
* nfd-gpu's scan as a CLI process (``nfd-gpu scan --root TREE``; ``--cli`` picks the
  executable, e.g. one from a regular, non-editable install),
* ``lspci -nn -A linux-sysfs -O sysfs.path=TREE/sys/bus/pci`` (pciutils),
* NFD's ``nfd-worker -oneshot -no-publish`` with only its ``pci`` source (the e2e build,
  tests/e2e/build.sh: it reads ``host-sys`` relative to its working directory),
* a plain-Python floor: exactly the files, links and directories the scan reads
  (recorded through HostRoot), opened and read with nothing else done.

A peer that is not installed is skipped with a note. ``--nvml-only`` times the NVML path
(``nvml.query`` over the fake library built from recorded answers) for 8 and 16 GPUs,
without and with MIG (7 MIG devices each): the Python cost a pass adds per NVIDIA GPU.

    python benchmarks/scan.py [--rounds 15] [--sizes 27,4096,16384] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import stat
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "benchmarks"))
if importlib.util.find_spec("nfd_gpu") is None:  # not installed: the source tree
    sys.path.insert(0, str(REPO))

import rounds  # noqa: E402


def _load_generator():  # type: ignore[no-untyped-def]
    """The fixture specs' builder (tests/fixtures/specs/common.py) and the HGX H100 spec."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))  # after an installed nfd_gpu: only for tests.fixtures
    from tests.fixtures.specs import common, nvidia

    return common, nvidia.hgx_h100


def build_tree(dest: Path, total: int) -> Path:
    """Write a synthetic host root of ``total`` PCI functions under ``dest`` (27: the HGX H100
    fixture's spec, 8 GPUs and 4 NVSwitches) and return it."""
    mf, hgx_h100 = _load_generator()
    if total == 27:
        spec = hgx_h100()
        spec.name = "bench-27"
    else:
        spec = mf.Spec(f"bench-{total}", "synthetic benchmark tree", _devices(mf, total))
        spec.modules = {"amdgpu": "6.10.5"}
    root: Path = mf.build(spec, dest)
    _config_headers(root)
    return root


def _devices(mf: Any, total: int) -> list[Any]:
    """16 AMD MI300X PFs with 63 VFs each, NICs with 127 VFs each up to ~93% of ``total``,
    then PCIe bridges."""
    Dev = mf.Dev
    devs = []
    n = 0
    # 16 AMD MI300X PFs with 63 VFs each (16 + 1008 functions), one bus per GPU.
    for g in range(16):
        bus = 0x10 + g
        vfs = []
        for v in range(63):
            slot, fn = divmod(v + 1, 8)
            addr = f"0000:{bus:02x}:{slot:02x}.{fn}"
            vf = Dev(addr, 0x1002, 0x74B5, 0x120000, (0x1002, 0x74A1), 0, g // 8, "vfio-pci")
            vf.iommu = 1000 + g * 64 + v
            vfs.append(vf)
        pf = Dev(f"0000:{bus:02x}:00.0", 0x1002, 0x74A1, 0x120000, (0x1002, 0x74A1), 0, g // 8)
        pf.driver, pf.link, pf.sriov_total, pf.vfs, pf.iommu = "gim", mf.GEN5, 63, vfs, 100 + g
        devs.append(pf)
        n += 64
    # NICs with VFs (PF + 127 VFs) until close to the total, then bridges.
    dom, bus = 0, 0x40
    while n + 128 <= total * 0.93:
        vfs = []
        for v in range(127):
            slot, fn = divmod(v + 1, 8)
            addr = f"{dom:04x}:{bus:02x}:{slot:02x}.{fn}"
            vfs.append(Dev(addr, 0x15B3, 0x101E, 0x020000, (0x15B3, 0x0016), 0, 0, "mlx5_core"))
        pf = Dev(f"{dom:04x}:{bus:02x}:00.0", 0x15B3, 0x101D, 0x020000, (0x15B3, 0x0016), 0, 0)
        pf.driver, pf.link, pf.sriov_total, pf.vfs = "mlx5_core", mf.GEN4, 127, vfs
        devs.append(pf)
        n += 128
        bus += 1
        if bus > 0xFF:
            dom, bus = dom + 2, 0
    i = 0
    while n < total:
        b, rest = divmod(i, 256)
        slot, fn = divmod(rest, 8)
        addr = f"0001:{b:02x}:{slot:02x}.{fn}"
        devs.append(Dev(addr, 0x8086, 0x352A, 0x060400, (0x8086, 0), 4, 0, "pcieport", mf.GEN5))
        n += 1
        i += 1
    return devs


def _config_headers(root: Path) -> None:
    """A 64-byte type-0 config header per function, so lspci reads what it reads on a host."""
    for dev_link in (root / "sys/bus/pci/devices").iterdir():
        d = dev_link.resolve()
        vendor = int((d / "vendor").read_text(), 16)
        device = int((d / "device").read_text(), 16)
        cls = int((d / "class").read_text(), 16)
        rev = int((d / "revision").read_text(), 16)
        sv = int((d / "subsystem_vendor").read_text(), 16)
        sd = int((d / "subsystem_device").read_text(), 16)
        hdr = bytearray(64)
        struct.pack_into("<HH", hdr, 0, vendor, device)
        struct.pack_into("<I", hdr, 8, (cls << 8) | rev)
        struct.pack_into("<HH", hdr, 0x2C, sv, sd)
        (d / "config").write_bytes(bytes(hdr))


def nvml_recording(gpus: int, mig: bool) -> dict:  # type: ignore[type-arg]
    """A recorded-answer JSON for ``gpus`` A100s (from the DGX fixture), MIG on or off."""
    import copy
    import json

    rec = json.loads((REPO / "tests/fixtures/sysfs/dgx-a100-mig-mixed/nvml.json").read_text())
    # device 1: MIG on with 7 x 1g.5gb; device 3: MIG off
    base = rec["devices"][1 if mig else 3]
    devices = []
    for i in range(gpus):
        d = copy.deepcopy(base)
        d["nvmlDeviceGetPciInfo"]["busId"] = f"00000000:{0x10 + i:02X}:00.0"
        d["nvmlDeviceGetMinorNumber"] = i
        devices.append(d)
    rec["devices"] = devices
    return rec


def nvml_rows(runs: int) -> list[tuple[str, float, str]]:
    from nfd_gpu.discovery.nvidia import nvml
    from nfd_gpu.discovery.nvidia import replay as nvml_replay

    rows = []
    for mig in (False, True):
        for gpus in (8, 16):
            lib = nvml_replay.build(nvml_recording(gpus, mig))
            facts = nvml.query(lib)
            assert facts is not None and len(facts.gpus) == gpus, facts
            assert len(facts.partitions) == (7 * gpus if mig else 0)
            t = median_time(lambda lib=lib: nvml.query(lib), max(runs, 21))
            what = f"NVML path, {gpus} GPUs" + (" MIG 7x" if mig else "")
            rows.append((what, t, f"{t * 1000 / gpus:.3f} ms per GPU (fake library)"))
    return rows


def median_time(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def scan_reads(root: Path) -> list[tuple[str, str]]:
    """What a scan of ``root`` reads, as (kind, absolute path): every path discovery asks
    HostRoot for (recorded), classified by what is there (``read`` a file, ``list`` a
    directory, ``link`` a symbolic link, ``open`` a missing path: a failed open)."""
    from nfd_gpu.host import HostRoot
    from nfd_gpu.scan import discover

    seen: list[str] = []
    host = HostRoot(root)
    host.set_recorder(seen.append)
    discover(host, nvml=None, nfd_attributes=False)
    host.close()
    out = []
    for rel in seen:
        p = f"{root}/{rel.strip('/')}"
        try:
            st = os.lstat(p)
        except OSError:
            out.append(("open", p))
            continue
        if stat.S_ISLNK(st.st_mode):
            out.append(("link", p))
        elif stat.S_ISDIR(st.st_mode):
            out.append(("list", p))
        else:
            out.append(("read", p))
    return out


def floor(reads: list[tuple[str, str]]) -> None:
    """The scan's reads in plain Python, nothing else: open/read/close, readlink, listdir."""
    for kind, p in reads:
        if kind == "read":
            fd = os.open(p, os.O_RDONLY)
            os.read(fd, 65537)
            os.close(fd)
        elif kind == "link":
            os.readlink(p)
        elif kind == "list":
            os.listdir(p)
        else:
            with contextlib.suppress(OSError):
                os.close(os.open(p, os.O_RDONLY))


def nfd_worker_binary(arg: str | None) -> str | None:
    for cand in (arg, REPO / "tests/e2e/bin/nfd-worker", "/work/main/tests/e2e/bin/nfd-worker"):
        if cand and os.access(cand, os.X_OK):
            return str(cand)
    return None


_UNUSED_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


def nfd_worker(binary: str, root: Path, work: Path) -> Any:
    """NFD's nfd-worker, one pass of its ``pci`` source over ``root``, nothing published: the
    e2e build reads the host as ``host-sys`` etc. relative to its working directory."""
    work.mkdir(parents=True, exist_ok=True)
    link = work / "host-sys"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(root / "sys")
    (work / "nfd-worker.conf").write_text("")
    # -no-publish still builds a Kubernetes client: one that is never used (nothing listens)
    (work / "kubeconfig").write_text(_UNUSED_KUBECONFIG)
    cmd = [
        binary,
        "-oneshot",
        "-no-publish",
        f"-kubeconfig={work / 'kubeconfig'}",
        f"-config={work / 'nfd-worker.conf'}",
        "-feature-sources=pci",
        "-label-sources=pci",
        "-port=0",
    ]
    env = dict(os.environ, NODE_NAME="bench", KUBERNETES_NAMESPACE="default")
    return rounds.child_process(cmd, cwd=str(work), env=env)


def contenders(root: Path, count: int, args: argparse.Namespace) -> tuple[dict[str, Any], dict]:
    from nfd_gpu.scan import run_scan

    r = run_scan(root)  # warm the page cache and check the result once
    assert len(r.snapshot.pci) == count, (len(r.snapshot.pci), count)
    c: dict[str, Any] = {}
    notes: dict[str, str] = {}
    name = "nfd-gpu in-process"
    c[name] = rounds.in_process(lambda: run_scan(root, nfd_attributes=False))
    notes[name] = (
        f"run_scan as the agent and `scan` run it: {len(r.snapshot.gpus)} GPUs, "
        f"{len(r.labels)} labels"
    )
    name = "nfd-gpu in-process, NFD attributes"
    c[name] = rounds.in_process(lambda: run_scan(root))
    notes[name] = "with pci.device's IOMMU attributes (as with rules)"
    exe = args.cli or shutil.which("nfd-gpu") or str(Path(sys.executable).with_name("nfd-gpu"))
    c["nfd-gpu CLI"] = rounds.child_process([exe, "scan", "--root", str(root)])
    notes["nfd-gpu CLI"] = f"`{exe} scan --root TREE`, {rounds.install_kind_of(exe)} install"
    lspci = shutil.which("lspci")
    if lspci:
        cmd = [lspci, "-nn", "-A", "linux-sysfs", "-O", f"sysfs.path={root}/sys/bus/pci"]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        assert lines.count("\n") == count, (lines.count("\n"), count)
        c["lspci -nn"] = rounds.child_process(cmd)
        notes["lspci -nn"] = "pciutils, -A linux-sysfs"
    else:
        print("note: lspci not found (apt-get install pciutils); peer skipped")
    worker = nfd_worker_binary(args.nfd_worker)
    if worker:
        c["NFD nfd-worker"] = nfd_worker(worker, root, root.parent / f"{root.name}-worker")
        notes["NFD nfd-worker"] = "-oneshot -no-publish, pci source (tests/e2e/build.sh)"
    else:
        print("note: nfd-worker not found (bash tests/e2e/build.sh nfd-worker); peer skipped")
    reads = scan_reads(root)  # what the in-process contender reads
    c["plain-Python floor"] = rounds.in_process(lambda: floor(reads))
    notes["plain-Python floor"] = f"the scan's {len(reads)} reads only, os.open/read/readlink"
    return c, notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", "--runs", type=int, default=15)
    ap.add_argument("--sizes", default="27,4096,16384", help="PCI functions per tree")
    ap.add_argument(
        "--keep", type=Path, help="build the trees here and keep them (reused when they exist)"
    )
    ap.add_argument("--cli", help="the nfd-gpu executable to time (default: on PATH)")
    ap.add_argument("--nfd-worker", help="NFD's nfd-worker (default: tests/e2e/bin)")
    ap.add_argument("--nvml-only", action="store_true", help="only the NVML path rows")
    args = ap.parse_args()

    if args.nvml_only:
        print(f"| {'what':<28} | {'median ms':>9} | notes")
        print(f"|{'-' * 30}|{'-' * 11}|------")
        for name, t_, note in nvml_rows(max(args.rounds, 21)):
            print(f"| {name:<28} | {t_ * 1000:>9.2f} | {note}")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="nfd-gpu-bench-"))
    out = args.keep or tmp
    for size in (int(x) for x in args.sizes.split(",")):
        root = out / f"bench-{size}"
        t = time.perf_counter()
        if args.keep and (root / "sys/bus/pci/devices").is_dir():
            how = "reused"
        else:
            build_tree(out, size)
            how = f"built in {time.perf_counter() - t:.1f} s"
        count = len(os.listdir(root / "sys/bus/pci/devices"))
        c, notes = contenders(root, count, args)
        res = rounds.interleave(c, args.rounds)
        ref = "lspci -nn" if "lspci -nn" in c else None
        print(f"\n{rounds.header(res, f'scan of {count} PCI functions ({how})')}\n")
        print(rounds.table(res, ref, notes))
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
