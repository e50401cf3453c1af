"""GPU architecture families derived from what the hardware or driver reports.

They are for GPUs the model tables do not name a family for: see :mod:`nfd_gpu.catalog.tables`.

* NVIDIA: from the CUDA compute capability.
  It comes from NVML's ``nvmlDeviceGetCudaComputeCapability``, or the table.
  The mapping is GPU Feature Discovery's ``getArchFamily``:
  NVIDIA/k8s-device-plugin ``internal/lm/resource.go``; ../shared/reference/nvidia.md §5.2.
  1 tesla, 2 fermi, 3 kepler, 5 maxwell, 6 pascal, 7.0-7.4 volta, 7.5+ turing,
  8.0-8.8 ampere, 8.9 ada-lovelace, 9 hopper, 10 and 12 blackwell, 13 rubin.
  A major GFD does not name, such as 4 or 11, is its ``undefined``: no family here.
* AMD: from the ISA target, KFD's ``gfx_target_version``.
  The mapping is LLVM's AMDGPUUsage processor table, as the AMD table's header cites it:
  gfx90x gcn5, gfx908 cdna1, gfx90a cdna2, gfx94x cdna3, gfx950 cdna4, gfx101x rdna1,
  gfx103x rdna2, gfx110x rdna3, gfx115x rdna3.5, gfx120x rdna4.
  Only the targets listed. gfx8 is left out: gfx803 is both Fiji, GCN3, and Polaris, GCN4.

Never from PCI device id ranges.
A leaf module: labels and discovery both use it. Labels use it for GFD's ``gpu.family``.
"""

from __future__ import annotations

from nfd_gpu.catalog import tables

# GFD getArchFamily's names by compute capability major (7 and 8 split by minor below)
_NVIDIA_MAJOR = {
    1: "tesla",
    2: "fermi",
    3: "kepler",
    5: "maxwell",
    6: "pascal",
    9: "hopper",
    10: "blackwell",
    12: "blackwell",
    13: "rubin",
}


def nvidia_family(major: int, minor: int) -> str | None:
    """Return the family of a CUDA compute capability; None where GFD says ``undefined``."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor >= 9 else "ampere"
    return _NVIDIA_MAJOR.get(major)


# LLVM AMDGPUUsage "Processors" table: each listed target, by name (no ranges)
_AMD_GFX = {
    **dict.fromkeys(("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"), "gcn5"),
    "gfx908": "cdna1",
    "gfx90a": "cdna2",
    **dict.fromkeys(("gfx940", "gfx941", "gfx942"), "cdna3"),
    "gfx950": "cdna4",
    **dict.fromkeys(("gfx1010", "gfx1011", "gfx1012", "gfx1013"), "rdna1"),
    **dict.fromkeys(
        ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"), "rdna2"
    ),
    **dict.fromkeys(("gfx1100", "gfx1101", "gfx1102", "gfx1103"), "rdna3"),
    **dict.fromkeys(("gfx1150", "gfx1151", "gfx1152", "gfx1153"), "rdna3.5"),
    **dict.fromkeys(("gfx1200", "gfx1201"), "rdna4"),
}


def amd_family(gfx: str | None) -> str | None:
    """Return the family of an AMD ISA target, ``gfx942`` -> ``cdna3``; None when not listed."""
    return _AMD_GFX.get((gfx or "").lower())


# The families each derivation can give, oldest first.
NVIDIA_FAMILIES = tuple(
    dict.fromkeys(f for m in range(1, 14) for n in (0, 5, 9) if (f := nvidia_family(m, n)))
)
AMD_FAMILIES = tuple(dict.fromkeys(_AMD_GFX.values()))


def vocabulary() -> dict[str, tuple[str, ...]]:
    """Return every ``family`` value the code can produce, per vendor.

    - The vendors are those of the registry: :func:`tables.vendor_names`.
    - First the derived values, oldest first; then any other the model tables name.
    - docs/labels.md lists them all.
    """
    derived = {"nvidia": NVIDIA_FAMILIES, "amd": AMD_FAMILIES}
    out = {}
    for vendor in tables.vendor_names():
        known = derived.get(vendor, ())
        named = {i.family for rows in tables.table(vendor).values() for i in rows if i.family}
        out[vendor] = known + tuple(sorted(named - set(known)))
    return out
