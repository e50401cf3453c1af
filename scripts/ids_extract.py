"""Extract the GPU identification facts from upstream files into tests/data/ids/*.tsv.

Run once per upstream update, with the upstream files at hand (a checkout, a Debian
package); the facts it writes (PCI ids, names, chip and platform per id) are what
scripts/gen_tables.py builds nfd_gpu/data/*.tsv from, offline. Only facts are kept, no
upstream code: each output starts with a comment naming the file, repository, commit or
version it was read from. tests/data/ids/README.md records each run.

    python scripts/ids_extract.py open-readme README.md "open-gpu-kernel-modules 595.45.04"
    python scripts/ids_extract.py amdgpu-drv amdgpu_drv.c "freebsd/drm-kmod 129bf0f ..."
    python scripts/ids_extract.py intel-pciids pciids.h "strongtz/i915-sriov-dkms 2421d3f ..."
    python scripts/ids_extract.py compute-runtime devices_base.inl "intel/compute-runtime e37c60b"
    python scripts/ids_extract.py pciids pci.ids "Debian pci.ids 0.0~2026.10.24-1"
    python scripts/ids_extract.py wikipedia-gpus gpu.json "voidful/gpu-info-api gpu-data 03a6b34"
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "ids"


def open_readme(text: str) -> Iterable[tuple[str, ...]]:
    """NVIDIA open-gpu-kernel-modules README 'Compatible GPUs': name, device id, subsystem."""
    for line in text.splitlines():
        m = re.match(
            r"^\|\s*(.+?)\s*\|\s*([0-9A-F]{4})(?: ([0-9A-F]{4}) ([0-9A-F]{4}))?\s*\|$", line
        )
        if m:
            name, dev, sv, sd = m.groups()
            sub = f"{sv}:{sd}".lower() if sv else "*"
            yield dev.lower(), sub, name


def amdgpu_drv(text: str) -> Iterable[tuple[str, ...]]:
    """The kernel's amdgpu ``pciidlist``: device id, CHIP_*, flags (AMD_IS_APU ...)."""
    pat = r"\{0x1002, 0x([0-9A-Fa-f]{4}), PCI_ANY_ID, PCI_ANY_ID, 0, 0, ([^}]*)\}"
    for m in re.finditer(pat, text):
        parts = [p.strip() for p in m.group(2).split("|")]
        chips = [p[5:] for p in parts if p.startswith("CHIP_")]
        flags = [p for p in parts if not p.startswith("CHIP_")]
        yield m.group(1).lower(), chips[0] if chips else "", ",".join(flags)


def intel_pciids(text: str) -> Iterable[tuple[str, ...]]:
    """include/drm/intel/pciids.h: device id, the innermost ``INTEL_<PLATFORM>..._IDS`` macro."""
    macro = ""
    for line in text.splitlines():
        d = re.match(r"#define (INTEL_\w+_IDS)\(", line)
        if d:
            macro = d.group(1)
            continue
        m = re.search(r"MACRO__\(0x([0-9A-Fa-f]{4})", line)
        if m and macro:
            yield m.group(1).lower(), macro


def compute_runtime(text: str) -> Iterable[tuple[str, ...]]:
    """intel/compute-runtime devices_base.inl: device id, hw config, name (may be empty)."""
    for m in re.finditer(r"(?:NAMED)?DEVICE\(0x([0-9A-Fa-f]{4}), (\w+)(?:, \"([^\"]*)\")?\)", text):
        yield m.group(1).lower(), m.group(2), m.group(3) or ""


def pciids(text: str) -> Iterable[tuple[str, ...]]:
    """pci.ids: the device lines of vendors 10de, 1002, 8086 (vendor, device id, name)."""
    vendor = ""
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]{4} ", line):
            vendor = line[:4]
        elif vendor in ("10de", "1002", "8086") and re.match(r"^\t[0-9a-f]{4} ", line):
            yield vendor, line[1:5], line[7:].strip()


_MEMORY_UNITS = (("Memory Size (GiB)", 1024), ("Memory Size (GB)", 1024), ("Memory Size (MiB)", 1))


def _one_number(value: object) -> float | None:
    """A cell holding one number (``24``, ``"16"``); None for ``"40 or 80"``, ``"2 4"``, ``?``."""
    text = str(value).strip()
    return float(text) if re.fullmatch(r"\d+(?:\.\d+)?", text) else None


# The list's core config from Pascal on: units joined by ':' then "(SMs) (GPCs)", e.g.
# RTX 4090 "16384:512 :176:512:128 (128) (11)"
_CORE_CONFIG = re.compile(r"^[\d: ]+\((\d+)\)\s*\(\d+\)$")


def wikipedia_gpus(text: str) -> Iterable[tuple[str, ...]]:
    """Wikipedia's "List of Nvidia graphics processing units" tables as gpu-info-api's
    gpu.json holds them: model, code name, memory (MiB; the list's GB are GiB) and SM count
    (its SM / SMX count column, else the core config's "(SMs) (GPCs)"), each empty unless
    the row gives exactly one value."""
    for row in json.loads(text).values():
        if row.get("Vendor") != "NVIDIA":
            continue
        cells = {k: v for k, v in row.items() if v not in (None, "nan", "")}
        model = next((str(cells[k]) for k in ("Model name", "Model") if k in cells), "")
        if not model:
            continue
        memory = ""
        for key, mib in _MEMORY_UNITS:
            if key in cells:
                size = _one_number(cells[key])
                memory = str(round(size * mib)) if size else ""
                break
        sms = [_one_number(cells[k]) for k in ("SM count", "SMX count") if k in cells]
        config = _CORE_CONFIG.match(str(cells.get("Core config", "")))
        sm = str(int(sms[0])) if sms and sms[0] else (config.group(1) if config else "")
        code = str(cells.get("Code name", "")).replace("\t", " ")
        yield model.replace("\t", " "), code, memory, sm


EXTRACTORS: dict[str, tuple[Callable[[str], Iterable[tuple[str, ...]]], str, str]] = {
    "open-readme": (open_readme, "nvidia-open-readme.tsv", "device_id\tsubsystem\tname"),
    "amdgpu-drv": (amdgpu_drv, "amdgpu-pciidlist.tsv", "device_id\tchip\tflags"),
    "intel-pciids": (intel_pciids, "intel-pciids.tsv", "device_id\tmacro"),
    "compute-runtime": (compute_runtime, "intel-compute-runtime.tsv", "device_id\thwconfig\tname"),
    "pciids": (pciids, "pci.ids.tsv", "vendor\tdevice_id\tname"),
    "wikipedia-gpus": (
        wikipedia_gpus,
        "nvidia-wikipedia.tsv",
        "model\tcode_name\tmemory_mib\tsm_count",
    ),
}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in EXTRACTORS:
        print(__doc__, file=sys.stderr)
        return 2
    kind, path, provenance = argv
    fn, name, header = EXTRACTORS[kind]
    text = Path(path).read_text("utf-8", errors="replace")
    rows = list(fn(text))
    if not rows:
        print(f"{path}: no {kind} entries found", file=sys.stderr)
        return 1
    if kind == "pciids":
        version = re.search(r"#\s*Version:\s*(\S+)", text)
        provenance += f" (pci.ids Version: {version.group(1) if version else '?'})"
    body = "".join("\t".join(r) + "\n" for r in rows)
    (OUT / name).write_text(
        f"# extracted by scripts/ids_extract.py {kind} from {provenance}\n{header}\n{body}", "utf-8"
    )
    print(f"{OUT / name}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
