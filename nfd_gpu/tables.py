"""The built-in GPU model tables (``nfd_gpu/data/<vendor>.tsv``).

They hold what pci.ids lacks (family, compute capability, MIG capability,
memory, SM/CU count, and the marketing name the vendor library reports), so
labels do not change when a vendor library becomes available. Each row cites
its sources in the ``source`` column.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ModelInfo:
    vendor: str
    device_id: str
    name: str | None = None
    family: str | None = None
    compute_major: int | None = None
    compute_minor: int | None = None
    mig_capable: bool | None = None
    max_mig: int | None = None
    memory_mib: int | None = None
    compute_units: int | None = None
    gfx: str | None = None
    vf: bool = False
    series: str | None = None  # Intel rules' family name: Max_Series, Flex_Series, A_Series
    short_product: str | None = None  # Intel rules' product name: Flex_170, Max_1550
    tiles: int | None = None
    revision: str = "*"
    subsystem: str = "*"  # NVIDIA rows a driver names per board: subsystem vendor:device


def _int(v: str | None) -> int | None:
    if v is None or v.strip() == "":
        return None
    try:
        return int(v.strip())
    except ValueError:
        return None


def _str(v: str | None) -> str | None:
    v = (v or "").strip()
    return v or None


def _bool(v: str | None) -> bool | None:
    v = (v or "").strip().lower()
    if v in ("yes", "true", "1"):
        return True
    if v in ("no", "false", "0"):
        return False
    return None


# Package data beside this module (pyproject.toml package-data), read as a file: importing
# importlib.resources would cost every scan a few milliseconds of start-up.
DATA = Path(__file__).with_name("data")


def _rows(vendor: str) -> list[dict[str, str]]:
    try:
        text = (DATA / f"{vendor}.tsv").read_text("utf-8")
    except FileNotFoundError:
        return []
    header: list[str] | None = None
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = [c.strip() for c in cells]
            continue
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


@functools.cache
def table(vendor: str) -> dict[str, tuple[ModelInfo, ...]]:
    """device id -> rows (several for AMD ids that differ by revision)."""
    out: dict[str, list[ModelInfo]] = {}
    for r in _rows(vendor):
        dev = (r.get("device_id") or "").strip().lower()
        if not dev:
            continue
        units = r.get("sm_count") if vendor == "nvidia" else r.get("compute_units")
        if vendor == "intel":
            units = r.get("xe_cores")
        info = ModelInfo(
            vendor=vendor,
            device_id=dev,
            name=_str(r.get("name")),
            family=_str(r.get("family")),
            compute_major=_int(r.get("compute_major")),
            compute_minor=_int(r.get("compute_minor")),
            mig_capable=_bool(r.get("mig_capable")),
            max_mig=_int(r.get("max_mig")),
            memory_mib=_int(r.get("memory_mib")),
            compute_units=_int(units),
            gfx=_str(r.get("gfx")),
            vf=bool(_bool(r.get("vf"))),
            series=_str(r.get("series")),
            short_product=_str(r.get("product")),
            tiles=_int(r.get("tiles")),
            revision=(_str(r.get("revision")) or "*").lower(),
            subsystem=(_str(r.get("subsystem")) or "*").lower(),
        )
        out.setdefault(dev, []).append(info)
    return {k: tuple(v) for k, v in out.items()}


@functools.cache
def pci_names(vendor: str) -> dict[str, str]:
    """device id -> pci.ids name (``data/<vendor>-pci-names.tsv``; only NVIDIA's is shipped,
    for GFD's vfio strategy), empty without the file."""
    out: dict[str, str] = {}
    for r in _rows(f"{vendor}-pci-names"):
        dev, name = (r.get("device_id") or "").strip().lower(), (r.get("name") or "").strip()
        if dev and name:
            out[dev] = name
    return out


def lookup(
    vendor: str, device_id: str, revision: str = "", subsystem: str = ""
) -> ModelInfo | None:
    """The row for a device: exact subsystem (``vendor:device``) first, then exact revision,
    then ``*``, then the first row."""
    rows = table(vendor).get(device_id.lower())
    if not rows:
        return None
    sub = subsystem.lower()
    for r in rows:
        if sub and r.subsystem == sub:
            return r
    rows = tuple(r for r in rows if r.subsystem == "*") or rows
    rev = revision.lower()
    for r in rows:
        if r.revision == rev:
            return r
    for r in rows:
        if r.revision == "*":
            return r
    return rows[0]
