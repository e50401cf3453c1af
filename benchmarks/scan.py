#!/usr/bin/env python3
"""Scan benchmark: nfd-gpu against lspci on the same synthetic sysfs tree.

Builds a tree of about 4,096 PCI functions (16 GPUs with 63 SR-IOV VFs each, plus
NICs with VFs and bridges) in the real sysfs shape, then reports the median of N
runs of:

* nfd-gpu's scan in-process (``run_scan``: discovery, snapshot, labels, features),
* nfd-gpu's scan as a CLI process (``nfd-gpu scan --root TREE``),
* ``lspci -nn -A linux-sysfs -O sysfs.path=TREE/sys/bus/pci`` (pciutils; skipped with
  a note when absent),

and the ratios to lspci. Absolute times are context; the ratios are the result.

It also times the NVML path (``nvml.query``: the adapter with its error handling and MIG
naming) against the fake library built from recorded answers (``nvml_replay``) for 8 and
16 GPUs, without and with MIG (7 MIG devices each), reported per GPU: the Python cost a
pass adds per NVIDIA GPU, excluding the time the real driver takes to answer.

    python benchmarks/scan.py [--runs 7] [--keep DIR] [--nvml-only]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _load_generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "make_fixtures", REPO / "tests/fixtures/make_fixtures.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixtures"] = mod
    spec.loader.exec_module(mod)
    return mod


def build_tree(dest: Path) -> int:
    """Write the synthetic host root; returns the number of PCI functions."""
    mf = _load_generator()
    Dev = mf.Dev
    devs = []
    n = 0
    # 16 AMD MI300X PFs with 63 VFs each (16 + 1008 functions), one bus per GPU.
    for g in range(16):
        bus = 0x10 + g
        vfs = []
        for v in range(63):
            slot, fn = divmod(v + 1, 8)
            vfs.append(
                Dev(
                    f"0000:{bus:02x}:{slot:02x}.{fn}",
                    0x1002,
                    0x74B5,
                    0x120000,
                    (0x1002, 0x74A1),
                    0x00,
                    g // 8,
                    "vfio-pci",
                    iommu=1000 + g * 64 + v,
                )
            )
        devs.append(
            Dev(
                f"0000:{bus:02x}:00.0",
                0x1002,
                0x74A1,
                0x120000,
                (0x1002, 0x74A1),
                0x00,
                g // 8,
                "gim",
                mf.GEN5,
                sriov_total=63,
                vfs=vfs,
                iommu=100 + g,
            )
        )
        n += 64
    # NICs with VFs (PF + 127 VFs) until close to 4,096 functions, then bridges.
    bus = 0x40
    while n + 128 <= 3800:
        vfs = []
        for v in range(127):
            slot, fn = divmod(v + 1, 8)
            vfs.append(
                Dev(
                    f"0000:{bus:02x}:{slot:02x}.{fn}",
                    0x15B3,
                    0x101E,
                    0x020000,
                    (0x15B3, 0x0016),
                    0x00,
                    0,
                    "mlx5_core",
                )
            )
        devs.append(
            Dev(
                f"0000:{bus:02x}:00.0",
                0x15B3,
                0x101D,
                0x020000,
                (0x15B3, 0x0016),
                0x00,
                0,
                "mlx5_core",
                mf.GEN4,
                sriov_total=127,
                vfs=vfs,
            )
        )
        n += 128
        bus += 1
    i = 0
    while n < 4096:
        b, rest = divmod(i, 256)
        slot, fn = divmod(rest, 8)
        devs.append(
            Dev(
                f"0001:{b:02x}:{slot:02x}.{fn}",
                0x8086,
                0x352A,
                0x060400,
                (0x8086, 0),
                0x04,
                0,
                "pcieport",
                mf.GEN5,
            )
        )
        n += 1
        i += 1
    spec = mf.Spec("bench", "synthetic benchmark tree", devs, modules={"amdgpu": "6.10.5"})
    root = mf.build(spec, dest)
    # A 64-byte type-0 config header per function, so lspci reads what it reads on a host.
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
    return len(list((root / "sys/bus/pci/devices").iterdir()))


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--keep", type=Path, help="build the tree here and keep it (reused when it exists)"
    )
    ap.add_argument("--nvml-only", action="store_true", help="only the NVML path rows")
    args = ap.parse_args()

    from nfd_gpu.scan import run_scan

    if args.nvml_only:
        print(f"| {'what':<28} | {'median ms':>9} | notes")
        print(f"|{'-' * 30}|{'-' * 11}|------")
        for name, t_, note in nvml_rows(args.runs):
            print(f"| {name:<28} | {t_ * 1000:>9.2f} | {note}")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="nfd-gpu-bench-"))
    out = args.keep or tmp
    t = time.perf_counter()
    root = out / "bench"
    if args.keep and (root / "sys/bus/pci/devices").is_dir():
        count = len(list((root / "sys/bus/pci/devices").iterdir()))
        print(f"tree: {count} PCI functions under {root} (reused)")
    else:
        count = build_tree(out)
        print(
            f"tree: {count} PCI functions under {root} (built in {time.perf_counter() - t:.1f} s)"
        )

    r = run_scan(root)  # warm the page cache and check the result once
    assert len(r.snapshot.pci) == count, (len(r.snapshot.pci), count)
    gpus = len(r.snapshot.gpus)

    rows: list[tuple[str, float | None, str]] = []
    inproc = median_time(lambda: run_scan(root), args.runs)
    rows.append(("nfd-gpu scan (in-process)", inproc, f"{gpus} GPUs, {len(r.labels)} labels"))
    exe = shutil.which("nfd-gpu") or str(Path(sys.executable).with_name("nfd-gpu"))
    cli_cmd = [exe, "scan", "--root", str(root)]
    env = dict(os.environ, NO_COLOR="1")
    cli = median_time(
        lambda: subprocess.run(cli_cmd, check=True, stdout=subprocess.DEVNULL, env=env), args.runs
    )
    rows.append(("nfd-gpu scan (CLI process)", cli, " ".join(["nfd-gpu", *cli_cmd[1:3], "TREE"])))

    lspci = shutil.which("lspci")
    lspci_t: float | None = None
    if lspci:
        cmd = [lspci, "-nn", "-A", "linux-sysfs", "-O", f"sysfs.path={root}/sys/bus/pci"]
        lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.count("\n")
        assert lines == count, (lines, count)
        lspci_t = median_time(
            lambda: subprocess.run(
                cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            ),
            args.runs,
        )
        rows.append(("lspci -nn (peer)", lspci_t, "pciutils, same tree"))
    else:
        print("note: lspci not found (apt-get install pciutils); peer column skipped")

    rows += nvml_rows(args.runs)

    print(f"\nmedian of {args.runs} runs, {count} PCI functions\n")
    print(f"| {'what':<28} | {'median ms':>9} | {'vs lspci':>8} | notes")
    print(f"|{'-' * 30}|{'-' * 11}|{'-' * 10}|------")
    for name, t_, note in rows:
        ratio = f"{t_ / lspci_t:.2f}x" if (lspci_t and t_ and "NVML" not in name) else "-"
        print(f"| {name:<28} | {t_ * 1000 if t_ else 0:>9.2f} | {ratio:>8} | {note}")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
