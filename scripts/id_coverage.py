"""How many GPU device ids of the newest pci.ids the tables identify, per vendor.

pci.ids = Debian's package pci.ids 0.0~2026.10.24-1 (sid; pci.ids Version 2026.10.24), saved
as tests/data/ids/pci.ids.tsv (see tests/data/ids/README.md). The GPUs counted are the device
ids of the architectures current drivers support:

* NVIDIA (10de): names starting with a Maxwell or newer chip code (GM, GP, GV, TU, GA, AD, GH,
  GB), less the non-GPU functions (audio, USB, UCSI, NVSwitch, bridges);
* AMD (1002): names starting with a GCN3 or newer code name (tests/data/ids/amd-chips.tsv) or
  ids the kernel's amdgpu pciidlist gives such a chip, less audio / USB / crypto functions;
* Intel (8086): ids the kernel's i915 / xe lists (pciids.h) give a Gen9 or newer platform.

Identified = the table has a product name and a family (and, for NVIDIA, a compute
capability). Every id that is not is printed with the reason.

    python scripts/id_coverage.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tables as gen  # scripts/gen_tables.py: the source readers

from nfd_gpu import tables


def candidates(vendor: str) -> dict[str, str]:
    """device id -> pci.ids name of the GPUs of supported architectures."""
    pci = gen.pciids({"nvidia": "10de", "amd": "1002", "intel": "8086"}[vendor])
    if vendor == "nvidia":
        return gen.nvidia_pci_gpus(pci)
    if vendor == "amd":
        kernel = {r["device_id"]: r["chip"] for r in gen.tsv("amdgpu-pciidlist.tsv")}
        return {
            d: n
            for d, n in pci.items()
            if gen.amd_chip(d, n, kernel) is not None and not gen._amd_function(n)
        }
    plats = gen.intel_platforms()
    return {d: n for d, n in pci.items() if d in plats}


def missing(vendor: str, device: str) -> str:
    """Why a device is not identified, or empty when it is."""
    info = tables.lookup(vendor, device)
    if info is None:
        return "no table row"
    gaps = [f for f in ("name", "family") if getattr(info, f) is None]
    if vendor == "nvidia" and info.compute_major is None:
        gaps.append("compute capability")
    return "no " + ", ".join(gaps) if gaps else ""


def reason(vendor: str, device: str, gap: str) -> str:
    """The cause of a gap, from the sources."""
    if vendor == "nvidia":
        if gap == "no table row":
            return "not in NVIDIA's driver lists (550 supported-gpus.json, 595 open README)"
        chip = gen.chip_code(gen.pciids("10de").get(device, ""))
        return f"no CUDA-table product on chip {chip} or two chips of its architecture"
    if vendor == "amd" and gap == "no table row":
        return "no name in amdgpu.ids or pci.ids"
    return "not in the kernel's i915 / xe lists" if vendor == "intel" else gap


def report(vendor: str) -> tuple[int, int, list[str], list[str]]:
    """(identified, counted, exceptions, not counted): NVIDIA ids whose pci.ids entry names
    no product (a chip code only, an engineering sample) are listed apart, uncounted."""
    lines, apart = [], []
    cands = candidates(vendor)
    for dev, name in sorted(cands.items()):
        gap = missing(vendor, dev)
        if gap and vendor == "nvidia" and not gen.pci_only_product(name):
            apart.append(f"  {dev}  {name}: {gap} (pci.ids names no product: chip code / sample)")
        elif gap:
            lines.append(f"  {dev}  {name}: {gap} ({reason(vendor, dev, gap)})")
    total = len(cands) - len(apart)
    return total - len(lines), total, lines, apart


def main() -> int:
    print("GPU device ids of pci.ids 2026.10.24 (Debian pci.ids 0.0~2026.10.24-1) identified")
    print("by nfd_gpu/data/*.tsv (product + family, + compute capability for NVIDIA):")
    for vendor in ("nvidia", "amd", "intel"):
        ok, total, lines, apart = report(vendor)
        print(f"{vendor}: {ok}/{total} = {100 * ok / total:.1f}%")
        print("\n".join(lines) if lines else "  (no exception)")
        if apart:
            print(f"  not counted ({len(apart)}):")
            print("\n".join(apart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
