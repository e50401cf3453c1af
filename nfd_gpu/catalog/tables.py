"""The built-in GPU model tables: ``nfd_gpu/data/<vendor>.tsv``.

- They hold what pci.ids lacks: family, compute capability, MIG capability, memory,
  SM or CU count, and the marketing name the vendor library reports.
- So labels do not change when a vendor library becomes available.
- Each row cites its sources in the ``source`` column.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

from nfd_gpu.record import Record, record


@record()
class ModelInfo(Record):
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
DATA = Path(__file__).parent.parent / "data"


@functools.cache
def vendor_names() -> tuple[str, ...]:
    """Return the GPU vendors, in the registry's order.

    - They are the vendor enum of the scan schema, ``data/scan-v1.schema.json``.
    - ``scripts/scan_schema.py`` writes it from ``discovery.registry.VENDORS``.
    - The layers below discovery read the names here.
    """
    import json  # lazy: read for the docs only, a scan needs no JSON codec

    doc = json.loads((DATA / "scan-v1.schema.json").read_text("utf-8"))
    return tuple(doc["$defs"]["gpu"]["properties"]["vendor"]["enum"])


@functools.cache
def _index(vendor: str) -> tuple[list[str], dict[str, list[str]]]:
    """Return the header and, per device id, its lines as read (the whole table listed).

    A scan converts only the rows of the ids it looks up (:func:`_lines`).
    Parsing every row of every table cost each start ~20 ms.
    """
    header, rows = _text(vendor)
    col = header.index("device_id") if "device_id" in header else 0  # tegra: soc
    by_id: dict[str, list[str]] = {}
    for line in rows.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t", col + 1)
        dev = cells[col].strip().lower() if col < len(cells) else ""
        if dev:
            by_id.setdefault(dev, []).append(line)
    return header, by_id


def _info(vendor: str, r: dict[str, str]) -> ModelInfo:
    """Build one row of ``vendor``'s table from its cells by column name."""
    units = r.get("sm_count") if vendor == "nvidia" else r.get("compute_units")
    if vendor == "intel":
        units = r.get("xe_cores")
    return ModelInfo(
        vendor=vendor,
        device_id=(r.get("device_id") or "").strip().lower(),
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


@functools.cache
def _text(vendor: str) -> tuple[list[str], str]:
    """Return the header and the rows' text of a table, a newline before its first row."""
    try:
        text = "\n" + (DATA / f"{vendor}.tsv").read_text("utf-8")
    except FileNotFoundError:
        return [], ""
    for line in io.StringIO(text):  # line by line to the header, not all 2,000 split
        line = line.rstrip("\r\n")
        if line.strip() and not line.startswith("#"):  # the header; comments start with #
            rows = text.index(f"\n{line}") + 1 + len(line)
            return [c.strip() for c in line.split("\t")], text[rows:]
    return [], ""


def _lines(vendor: str, key: str) -> list[str]:
    """The lines of one lower-case key, found in the text (no index of every row).

    - A scan looks up a few ids: indexing the NVIDIA table's 2,000 rows cost ~2.5 ms.
    - The key is each table's first column, lower case: scripts/gen_tables.py writes
      them so, tests/test_tables_generated.py checks it.
    """
    if "\t" in key or "\n" in key:  # no key holds one; it would match across columns
        return []
    _, text = _text(vendor)
    needle, out = f"\n{key}\t", []
    at = text.find(needle)
    while at >= 0:
        end = text.find("\n", at + 1)
        out.append(text[at + 1 : end if end >= 0 else len(text)])
        at = text.find(needle, at + 1)
    return out


@functools.cache
def _models(vendor: str, device_id: str) -> tuple[ModelInfo, ...]:
    """Return the rows of one lower-case device id, converted on first use."""
    header = _text(vendor)[0]
    lines = _lines(vendor, device_id) if device_id else ()
    return tuple(_info(vendor, dict(zip(header, ln.split("\t"), strict=False))) for ln in lines)


def table(vendor: str) -> dict[str, tuple[ModelInfo, ...]]:
    """Return device id -> rows; AMD ids that differ by revision have several."""
    return {dev: _models(vendor, dev) for dev in _index(vendor)[1]}


@functools.cache
def pci_names(vendor: str) -> dict[str, str]:
    """Return device id -> pci.ids name from ``data/<vendor>-pci-names.tsv``.

    Only NVIDIA's is shipped, for GFD's vfio strategy. Empty without the file.
    """
    header, by_id = _index(f"{vendor}-pci-names")
    col = header.index("name") if "name" in header else len(header)
    out: dict[str, str] = {}
    for dev, lines in by_id.items():
        cells = lines[0].split("\t")
        if col < len(cells) and cells[col].strip():
            out[dev] = cells[col].strip()
    return out


def lookup(
    vendor: str, device_id: str, revision: str = "", subsystem: str = ""
) -> ModelInfo | None:
    """Return the row for a device.

    The order: exact subsystem ``vendor:device`` first, then exact revision, then ``*``,
    then the first row.
    """
    rows = _models(vendor, device_id.lower())
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


@functools.cache
def tegra(soc: str) -> tuple[str, int, int, str] | None:
    """Return an NVIDIA SoC's integrated GPU from ``data/tegra.tsv``; None if unknown.

    - The key is the device-tree compatible ``nvidia,<soc>``.
    - The result is CUDA device name, compute major, minor and family.
    """
    header = _text("tegra")[0]
    lines = _lines("tegra", soc.lower()) if soc else []
    if not lines:
        return None
    cells = dict(zip(header, lines[0].split("\t"), strict=False))
    major, minor = int(cells["compute_major"]), int(cells["compute_minor"])
    return cells.get("name", "").strip(), major, minor, cells.get("family", "").strip()
