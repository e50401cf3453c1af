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
capability). Every id that is not is printed with the reason. Then:

* NVIDIA family: of the pci.ids NVIDIA GPU ids above with the chip-code-only ones, and of
  every id whose name begins with a chip code (any architecture from Tesla's G80 on), how many
  the table gives a family (from the code's prefix: ids/nvidia-chip-architectures.tsv);
* fill rate: per vendor, how many named table rows carry a memory size and an SM / CU /
  Xe-core count.

    python scripts/id_coverage.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_tables as gen  # scripts/gen_tables.py: the source readers

from nfd_gpu.catalog import tables


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


def nvidia_family(ids: dict[str, str]) -> tuple[int, int, list[str]]:
    """(with a family, counted, those without) over NVIDIA GPU ids (id -> pci.ids name)."""
    lacking = [f"  {d}  {n}" for d, n in sorted(ids.items()) if not _family("nvidia", d)]
    return len(ids) - len(lacking), len(ids), lacking


def _family(vendor: str, device: str) -> str | None:
    info = tables.lookup(vendor, device)
    return info.family if info else None


UNITS = {"nvidia": "sm_count", "amd": "compute_units", "intel": "xe_cores"}


def fill_rate(vendor: str) -> str:
    """Named rows of the vendor's table with a memory size / a unit count."""
    text = (tables.DATA / f"{vendor}.tsv").read_text("utf-8")
    lines = [ln.split("\t") for ln in text.splitlines() if ln and not ln.startswith("#")]
    head, rows = lines[0], [r for r in lines[1:] if r[lines[0].index("name")]]
    mem = sum(1 for r in rows if r[head.index("memory_mib")])
    units = sum(1 for r in rows if r[head.index(UNITS[vendor])])
    return (
        f"{vendor}: memory {mem}/{len(rows)} = {100 * mem / len(rows):.1f}%, "
        f"{UNITS[vendor]} {units}/{len(rows)} = {100 * units / len(rows):.1f}%"
    )


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
    pci = gen.pciids("10de")
    for what, ids in (
        ("Maxwell and newer, chip-code-only ids included", gen.nvidia_pci_gpus(pci)),
        ("every chip-coded id, G80 on", gen.nvidia_chip_gpus(pci)),
    ):
        ok, total, lacking = nvidia_family(ids)
        print(f"nvidia family, pci.ids GPU ids ({what}): {ok}/{total} = {100 * ok / total:.1f}%")
        print("\n".join(lacking) if lacking else "  (no exception)")
    print("fill rate of the named table rows (memory, units):")
    for vendor in ("nvidia", "amd", "intel"):
        print("  " + fill_rate(vendor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
