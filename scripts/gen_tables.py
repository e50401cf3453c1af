"""Generate nfd_gpu/data/{nvidia,amd,intel}.tsv from the saved public lists in tests/data/ids/.

Offline: it reads only tests/data/ids/ (each file names its upstream there and in
tests/data/ids/README.md; scripts/ids_extract.py refreshes the extracted ones).

* NVIDIA: the driver's own product names (supported-gpus.json of driver 550 for Maxwell to
  Volta and every GPU that branch knows, the open kernel modules' README for Turing and newer,
  which wins where both name a device), keyed by device id and, where the driver names a
  subsystem, subsystem vendor:device. Chip = the pci.ids chip code (GA102, GB202, ...); compute
  capability per chip = the CUDA table's value for the driver products of that chip; family
  from the compute capability as GFD's getArchFamily does, else from the chip code's prefix
  (nvidia-chip-architectures.tsv). Every pci.ids id with a chip code gets a row (its name left
  to pci.ids where no list names it). Memory and SM count: curated, else Wikipedia's list
  (nvidia-wikipedia.tsv) where all its rows of the product give one value.
* AMD: libdrm's amdgpu.ids names by device id and revision; chip by the kernel's pciidlist, else
  the pci.ids code name; gfx target and family per chip (amd-chips.tsv).
* Intel: device id -> platform from the kernel's pciids.h (Gen9 and newer), name from
  intel/compute-runtime, else pci.ids; family per platform (intel-platforms.tsv).

Columns no public list gives per device id (memory of one-size SKUs, SM / CU / Xe-core counts,
MIG, Intel's rule names, VFs) come from curated-<vendor>.tsv, the hand-researched rows (each
citing its sources), which also keep the devices the lists lack.

    python scripts/gen_tables.py          # rewrite nfd_gpu/data/*.tsv
    python scripts/gen_tables.py --check  # exit 1 if they differ (tests/test_tables_generated.py)
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "data" / "ids"
DATA = ROOT / "nfd_gpu" / "data"
Row = dict[str, str]


def tsv(name: str) -> list[Row]:
    """The rows of a tab-separated file of tests/data/ids (``#`` lines are comments)."""
    lines = [ln for ln in (SRC / name).read_text("utf-8").splitlines() if ln and ln[0] != "#"]
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"), strict=False)) for ln in lines[1:]]


def pciids(vendor: str) -> dict[str, str]:
    return {r["device_id"]: r["name"] for r in tsv("pci.ids.tsv") if r["vendor"] == vendor}


def bracket(name: str) -> str:
    """The marketing part of a pci.ids name: the last ``[...]``, else the whole name."""
    m = re.findall(r"\[([^\]]+)\]", name)
    return m[-1] if m else name


def arch_family(cc: str) -> str:
    """GFD ``getArchFamily`` (k8s-device-plugin internal/lm/resource.go) for major.minor."""
    major, minor = (int(x) for x in cc.split("."))
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    names = {5: "maxwell", 6: "pascal", 9: "hopper", 10: "blackwell", 12: "blackwell"}
    return names.get(major, "rubin" if major == 13 else "")


# ---------------------------------------------------------------- NVIDIA


def nvidia_names() -> dict[tuple[str, str], tuple[str, str]]:
    """(device id, subsystem or ``*``) -> (driver name, which list)."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    raw = gzip.decompress((SRC / "nvidia-supported-gpus-550.163.01.json.gz").read_bytes())
    for c in json.loads(raw)["chips"]:
        if c.get("legacybranch"):
            continue  # Kepler and older: only legacy branches support them
        sub = "*"
        if "subdevid" in c:
            sub = f"{c['subvendorid'][2:]}:{c['subdevid'][2:]}".lower()
        out[(c["devid"][2:].lower(), sub)] = (c["name"], "driver 550 supported-gpus.json")
    for r in tsv("nvidia-open-readme.tsv"):
        out[(r["device_id"], r["subsystem"])] = (r["name"], "open-gpu-kernel-modules README")
    return out


def chip_code(pci_name: str) -> str:
    """``GA102GL [A40]`` -> ``GA102``; ``GB20B [GB10]`` -> ``GB20B``; ``G92 [...]`` -> ``G92``;
    else empty (NV4x and older, chipsets)."""
    m = re.match(r"((?:GM|GP|GV|TU|GA|AD|GH|GB|GR|GK|GF|GT)\d{2,3}|G[89]\d)([A-Z]*)", pci_name)
    if not m:
        return ""
    return m.group(1) + ("B" if m.group(2) in ("B", "BGL", "BM") else "")


@functools.cache
def _chip_prefixes() -> tuple[tuple[str, str], ...]:
    rows = tsv("nvidia-chip-architectures.tsv")
    return tuple(sorted(((r["prefix"], r["family"]) for r in rows), key=lambda t: -len(t[0])))


def chip_family(chip: str) -> str:
    """The architecture (family label value) of a chip code, from its prefix
    (nvidia-chip-architectures.tsv: GA -> ampere, GK -> kepler); empty for none."""
    return next((fam for pre, fam in _chip_prefixes() if chip.startswith(pre)), "")


def _norm(name: str) -> str:
    name = name.lower().replace("geforce ", "").replace("nvidia ", "").replace("tesla ", "")
    return name.strip()


def cuda_cc(product: str, table: list[Row]) -> str:
    """The CUDA table's compute capability for a driver product name (longest match)."""
    p = _norm(product)
    best = ("", 0)
    for r in table:
        c = _norm(r["product"])
        if (p == c or p.startswith(c + " ") or p.startswith(c + "-")) and len(c) > best[1]:
            best = (r["cc"], len(c))
    return best[0]


def wikipedia_facts() -> dict[str, tuple[str, str]]:
    """Product (normalised name) -> (memory MiB, SM count) from Wikipedia's list
    (nvidia-wikipedia.tsv): each the one value all the list's rows of that name give, else
    empty (sizes that differ by board, a row without the figure)."""
    seen: dict[str, tuple[set[str], set[str]]] = {}
    for r in tsv("nvidia-wikipedia.tsv"):
        memory, sms = seen.setdefault(_norm(r["model"]), (set(), set()))
        memory.add(r["memory_mib"])
        sms.add(r["sm_count"])
    return {n: tuple(v.pop() if len(v) == 1 else "" for v in vals) for n, vals in seen.items()}  # type: ignore[misc]


def chip_ccs(
    names: dict[tuple[str, str], tuple[str, str]], pci: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """Chip code -> compute capability, from the CUDA table's products of that chip.

    A chip none of whose products is in the CUDA table takes the value that at least two chips
    of its architecture agree on (longest common chip-code prefix: TU116 from TU10x/TU117 =
    7.5), or a ``B`` die that of its base chip (GA107B from GA107).
    """
    table = tsv("cuda-gpus.tsv")
    seen: dict[str, Counter[str]] = {}
    for (dev, _), (name, _) in names.items():
        chip, cc = chip_code(pci.get(dev, "")), cuda_cc(name, table)
        if chip and cc:
            seen.setdefault(chip, Counter())[cc] += 1
    out: dict[str, tuple[str, str]] = {}
    for chip, votes in seen.items():
        (best, n), *rest = votes.most_common()
        if rest and rest[0][1] == n:
            print(f"warning: {chip}: CUDA products disagree {dict(votes)}", file=sys.stderr)
            continue
        out[chip] = (best, "CUDA GPUs table, per chip")  # a name reused on another chip is outvoted
    chips = {chip_code(n) for n in nvidia_pci_gpus(pci).values()} - {""}
    for chip in sorted(chips - set(out)):
        if chip.endswith("B") and chip[:-1] in seen:  # a B die: its base chip's value
            out[chip] = (out[chip[:-1]][0], f"CUDA GPUs table: chip {chip[:-1]}")
            continue
        for n in range(len(chip) - 1, 1, -1):
            near = [cc for c, (cc, _) in out.items() if c.startswith(chip[:n])]
            agree = set(near)
            if len(near) > 1:
                if len(agree) == 1:
                    out[chip] = (agree.pop(), f"CUDA GPUs table: every {chip[:n]}* chip")
                break
    return out


NVIDIA_FUNCTION = re.compile(
    r"Audio|USB|UCSI|NVSwitch|[Bb]ridge|PCIe host|SMBus|Serial Bus|Ethernet|NVLink"
)
NOT_A_PRODUCT = re.compile(
    r"Engineering Sample|\bES\b|ES-A|FAKE|SKU|INT52|CS1|Reserved|\[G[A-Z]\d+"
)


def nvidia_chip_gpus(pci: dict[str, str]) -> dict[str, str]:
    """pci.ids devices whose name begins with a GPU chip code of any architecture (Tesla's
    G80 on) and that are GPUs: every one the table gives a family, by the code's prefix."""
    return {d: n for d, n in pci.items() if chip_code(n) and not NVIDIA_FUNCTION.search(n)}


def nvidia_pci_gpus(pci: dict[str, str]) -> dict[str, str]:
    """pci.ids devices of a Maxwell or newer chip that are GPUs (not audio, USB, ...)."""
    return {
        d: n
        for d, n in pci.items()
        if re.match(r"(GM|GP|GV|TU|GA|AD|GH|GB)\d", n) and not NVIDIA_FUNCTION.search(n)
    }


def pci_only_product(name: str) -> bool:
    """A pci.ids GPU name with a product name in brackets that is not an engineering sample."""
    return "[" in name and not NOT_A_PRODUCT.search(name)


def nvidia_rows(curated: list[Row]) -> list[Row]:
    names, pci = nvidia_names(), pciids("10de")
    ccs = chip_ccs(names, pci)
    wiki = wikipedia_facts()
    cur = {(r["device_id"], r.get("subsystem") or "*"): r for r in curated}
    # Products the driver lists do not name (Tesla P4, GRID M10, ...): pci.ids names them
    extra = {d for d, n in nvidia_pci_gpus(pci).items() if pci_only_product(n)}
    named = {d for d, _ in names} | {d for d, _ in cur} | extra
    # ids no list names (a chip code only, a sample, an older architecture): a row for the
    # facts their chip gives (family, compute capability), the name left to pci.ids
    devices = sorted(named | set(nvidia_chip_gpus(pci)))
    rows: list[Row] = []
    for dev in devices:
        subs = sorted(s for d, s in names if d == dev and s != "*")
        for sub in ["*", *subs]:
            rows.append(_nvidia_row(dev, sub, names, pci, ccs, cur))
            if dev in named:
                if not MOBILE_CHIP.match(pci.get(dev, "")):
                    _wikipedia_fill(rows[-1], wiki)
            else:
                rows[-1]["name"] = ""
                rows[-1]["source"] = rows[-1]["source"].replace(
                    "name: pci.ids (not in the driver's lists)", "name: pci.ids at run time"
                )
    return rows


# a mobile chip (TU116M): the driver may name it as the desktop product ("GeForce GTX 1660 Ti"),
# whose figures in the list are the desktop board's
MOBILE_CHIP = re.compile(r"[A-Z]+\d+[A-Z]*M\b")


def _wikipedia_fill(row: Row, wiki: dict[str, tuple[str, str]]) -> None:
    """Memory and SM count Wikipedia's list gives the row's product, where no curated
    value is (a curated one is what NVML reported, or a count the sources agree on)."""
    memory, sms = wiki.get(_norm(row["name"]), ("", ""))
    used = []
    if memory and not row["memory_mib"]:
        row["memory_mib"] = memory
        used.append("memory")
    if sms and not row["sm_count"]:
        row["sm_count"] = sms
        used.append("SM count")
    if used:
        row["source"] += f"; {' and '.join(used)}: Wikipedia's list (nvidia-wikipedia.tsv)"


def _nvidia_generic_name(
    dev: str, names: dict[tuple[str, str], tuple[str, str]], pci: str, curated: str
) -> tuple[str, str]:
    """The name of a device whatever its subsystem, and its source: the driver's own, the
    curated one (an NVML name seen in public output), the one name all its subsystem variants
    share, else the pci.ids name (prefixed as the driver prefixes it)."""
    if (dev, "*") in names:
        return names[(dev, "*")]
    if curated:
        return curated, "curated"
    variants = {n for (d, s), (n, _) in names.items() if d == dev}
    if len(variants) == 1:
        return variants.pop(), "the driver's name for every subsystem"
    return ("NVIDIA " + bracket(pci), "pci.ids (not in the driver's lists)") if pci else ("", "")


def _nvidia_row(
    dev: str,
    sub: str,
    names: dict[tuple[str, str], tuple[str, str]],
    pci_names: dict[str, str],
    ccs: dict[str, tuple[str, str]],
    cur: dict[tuple[str, str], Row],
) -> Row:
    pci = pci_names.get(dev, "")
    chip = chip_code(pci)
    cc, how = ccs.get(chip, ("", ""))
    c = cur.get((dev, sub)) or cur.get((dev, "*"), {})  # a board inherits its device's facts
    if sub == "*":
        name, src = _nvidia_generic_name(dev, names, pci, cur.get((dev, "*"), {}).get("name", ""))
    else:
        name, src = names[(dev, sub)]
    notes = [f"name: {src}"]
    if chip:
        notes.append(f"chip {chip} (pci.ids)")
    if cc:
        notes.append(f"CC {cc} ({how})")
    if c.get("source") and sub == "*":
        notes.append("curated: " + c["source"])
    major, minor = cc.split(".") if cc else (c.get("compute_major", ""), c.get("compute_minor", ""))
    family = arch_family(cc) if cc else chip_family(chip) or c.get("family", "")
    if cc and chip_family(chip) not in ("", family):
        raise SystemExit(f"{dev}: chip {chip} is {chip_family(chip)} by its prefix, CC {cc}")
    if not cc and chip_family(chip):
        notes.append("family: chip prefix (nvidia-chip-architectures.tsv)")
    return {
        "device_id": dev,
        "subsystem": sub,
        "name": name,
        "family": family,
        "compute_major": major,
        "compute_minor": minor,
        "chip": chip,
        "mig_capable": c.get("mig_capable", ""),
        "max_mig": c.get("max_mig", ""),
        "memory_mib": c.get("memory_mib", ""),
        "sm_count": c.get("sm_count", ""),
        "source": "; ".join(notes),
    }


# ---------------------------------------------------------------- AMD


def amd_chip_table() -> list[tuple[str, Row]]:
    """(pci.ids code name, chip row), longest code names first."""
    out = [(n.strip(), r) for r in tsv("amd-chips.tsv") for n in r["codenames"].split(",")]
    return sorted(out, key=lambda t: -len(t[0]))


def amd_chip(dev: str, pci: str, kernel: dict[str, str]) -> Row | None:
    """The chip row of a device: the kernel's CHIP_* for it, else its pci.ids code name."""
    chips = amd_chip_table()
    if dev in kernel:
        return next((r for _, r in chips if r["chip"] == kernel[dev]), None)
    for code, r in chips:
        if code.endswith("*") and pci.startswith(code[:-1]):
            return r  # a code name plus the start of the bracket part (MI350 on Aqua Vanjaram)
        if pci == code or pci.startswith(code + " ") or pci.startswith(code + "/"):
            return r
    return None


def amdgpu_ids() -> dict[str, dict[str, str]]:
    """device id -> {revision: name} from libdrm's amdgpu.ids."""
    out: dict[str, dict[str, str]] = {}
    for line in (SRC / "amdgpu.ids").read_text("utf-8").splitlines():
        m = re.match(r"^([0-9A-Fa-f]{4}),\s*([0-9A-Fa-f]{2}),\s*(.+)$", line)
        if m:
            out.setdefault(m.group(1).lower(), {})[m.group(2).lower()] = m.group(3).strip()
    return out


def amd_rows(curated: list[Row]) -> list[Row]:
    ids, pci = amdgpu_ids(), pciids("1002")
    kernel = {r["device_id"]: r["chip"] for r in tsv("amdgpu-pciidlist.tsv")}
    cur = {(r["device_id"], r["revision"]): r for r in curated}
    devices = set(ids) | {d for d, _ in cur}
    devices |= {d for d, n in pci.items() if amd_chip(d, n, kernel) and not _amd_function(n)}
    rows: list[Row] = []
    for dev in sorted(devices):
        chip = amd_chip(dev, pci.get(dev, ""), kernel)
        if chip is None and not any(d == dev for d, _ in cur):
            continue  # a chip older than GCN3: not in scope
        revs = ids.get(dev, {})
        keys = sorted(set(revs) | {r for d, r in cur if d == dev})
        if len(set(revs.values())) != 1 or any(r != "*" for d, r in cur if d == dev):
            keys = [k for k in keys if k != "*"] + ["*"]
        else:
            keys = ["*"]
        for rev in keys:
            rows.append(_amd_row(dev, rev, revs, pci.get(dev, ""), chip, cur.get((dev, rev), {})))
    return rows


def _amd_function(pci_name: str) -> bool:
    """A non-GPU function of an AMD GPU (audio, USB, crypto) by its pci.ids name."""
    return bool(re.search(r"Audio|USB|Cryptographic|HDMI Controller|Dummy", pci_name))


def _amd_row(dev: str, rev: str, revs: dict[str, str], pci: str, chip: Row | None, c: Row) -> Row:
    if rev in revs:
        name, src = revs[rev], f"amdgpu.ids ({dev.upper()},{rev.upper()})"
    elif rev == "*" and len(set(revs.values())) == 1:
        name, src = next(iter(revs.values())), "amdgpu.ids"
    elif c.get("name"):
        name, src = c["name"], "curated"
    else:
        name, src = ("AMD " + bracket(pci), "pci.ids") if pci else ("", "")
    gfx = (chip or {}).get("gfx", "") or c.get("gfx", "")
    family = (chip or {}).get("family", "") or c.get("family", "")
    notes = [f"name: {src}"]
    if chip:
        notes.append(f"chip {chip['chip']} (gfx/family: amd-chips.tsv)")
    if c.get("source"):
        notes.append("curated: " + c["source"])
    return {
        "device_id": dev,
        "revision": rev,
        "name": name,
        "gfx": gfx,
        "family": family,
        "memory_mib": c.get("memory_mib", ""),
        "compute_units": c.get("compute_units", ""),
        "vf": c.get("vf", "") or ("yes" if re.search(r"\bVF\b|MxGPU", name) else "no"),
        "source": "; ".join(notes),
    }


# ---------------------------------------------------------------- Intel


def intel_platforms() -> dict[str, Row]:
    """device id -> platform row, Gen9 and newer."""
    plats = {r["prefix"]: r for r in tsv("intel-platforms.tsv")}
    out: dict[str, Row] = {}
    for r in tsv("intel-pciids.tsv"):
        rest = r["macro"][len("INTEL_") :]
        prefix = "ATS_M" if rest.startswith("ATS_M") else rest.split("_")[0]
        if prefix in plats:
            out.setdefault(r["device_id"], plats[prefix])
    return out


def intel_rows(curated: list[Row]) -> list[Row]:
    plats, pci = intel_platforms(), pciids("8086")
    runtime = {r["device_id"]: r["name"] for r in tsv("intel-compute-runtime.tsv")}
    cur = {r["device_id"]: r for r in curated}
    rows: list[Row] = []
    for dev in sorted(set(plats) | set(cur)):
        p, c = plats.get(dev, {}), cur.get(dev, {})
        name, src = _intel_name(runtime.get(dev, ""), pci.get(dev, ""), p.get("discrete") == "yes")
        if not name:
            name, src = c.get("name", ""), "curated" if c.get("name") else ""
        notes = [f"name: {src}"] if src else ["no name in compute-runtime or pci.ids"]
        if p:
            notes.append(f"platform {p['platform']} (kernel pciids.h; family: intel-platforms.tsv)")
        if c.get("source"):
            notes.append("curated: " + c["source"])
        rows.append(
            {
                "device_id": dev,
                "name": name,
                "family": p.get("family", "") or c.get("family", ""),
                "platform": p.get("platform", ""),
                "series": c.get("series", ""),
                "product": c.get("product", ""),
                "memory_mib": c.get("memory_mib", ""),
                "xe_cores": c.get("xe_cores", ""),
                "tiles": c.get("tiles", ""),
                "source": "; ".join(notes),
            }
        )
    return rows


def _intel_name(runtime: str, pci: str, discrete: bool) -> tuple[str, str]:
    """Level Zero's name (compute-runtime) without (R)/(TM), ' Graphics' dropped for dGPUs."""
    if runtime:
        name = runtime.replace("(R)", "").replace("(TM)", "")
        if discrete and name.endswith(" Graphics"):
            name = name[: -len(" Graphics")]
        return name, "compute-runtime"
    if pci:
        part = bracket(pci)
        return (part if part.startswith("Intel") else "Intel " + part), "pci.ids"
    return "", ""


# ---------------------------------------------------------------- output

HEADERS = {
    "nvidia": (
        "# NVIDIA PCI device id (vendor 10de) [+ subsystem vendor:device] -> GPU facts, used when"
        " NVML is unavailable.\n# GENERATED by scripts/gen_tables.py from tests/data/ids/ (see its"
        " README.md): do not edit; edit the sources or curated-nvidia.tsv.\n# subsystem: * = any"
        " (look up the exact subsystem first). name = the driver's product name (NVML's).\n"
        "# family = GFD getArchFamily(compute capability); CC per chip from the CUDA GPUs table.\n"
    ),
    "amd": (
        "# AMD PCI device id (vendor 1002) + revision -> GPU facts, used when libdrm/amdsmi are"
        " unavailable.\n# GENERATED by scripts/gen_tables.py from tests/data/ids/ (see its"
        " README.md): do not edit; edit the sources or curated-amd.tsv.\n# revision: 2 lower-hex"
        " digits, or * = any revision (exact revision first, then *). name: libdrm amdgpu.ids,"
        " else pci.ids.\n"
    ),
    "intel": (
        "# Intel PCI device id (vendor 8086) -> GPU facts, used when Level Zero / xpu-smi are"
        " unavailable.\n# GENERATED by scripts/gen_tables.py from tests/data/ids/ (see its"
        " README.md): do not edit; edit the sources or curated-intel.tsv.\n# name: intel/"
        "compute-runtime (Level Zero), else pci.ids; platform: kernel pciids.h; series/product:"
        " Intel's NFD rules.\n"
    ),
}


PCI_NAMES = "nvidia-pci-names.tsv"
TEGRA = "tegra.tsv"


def render_tegra() -> str:
    """nfd_gpu/data/tegra.tsv: each NVIDIA SoC's integrated GPU (tegra-socs.tsv): its CUDA
    name, compute capability and family (GFD's getArchFamily of the cc; the architecture
    NVIDIA names where GFD has none, 11.x)."""
    lines = []
    for r in tsv("tegra-socs.tsv"):
        gfd = arch_family(r["cc"])
        if gfd and gfd != r["architecture"]:
            raise ValueError(
                f"tegra-socs.tsv {r['soc']}: {r['architecture']} but cc {r['cc']} is {gfd}"
            )
        major, minor = r["cc"].split(".")
        lines.append("\t".join([r["soc"], r["cuda_name"], major, minor, r["architecture"]]))
    return (
        "# NVIDIA SoC (device-tree compatible nvidia,<soc>) -> its integrated GPU.\n"
        "# GENERATED by scripts/gen_tables.py from tests/data/ids/tegra-socs.tsv (see its header"
        " for the sources): do not edit.\nsoc\tname\tcompute_major\tcompute_minor\tfamily\n"
        + "".join(ln + "\n" for ln in lines)
    )


def render_pci_names() -> str:
    """nfd_gpu/data/nvidia-pci-names.tsv: every NVIDIA device line of pci.ids.tsv, the names
    GFD's vfio strategy gives passed-through GPUs (go-nvlib reads pci.ids for them)."""
    rows = sorted(pciids("10de").items())
    return (
        "# NVIDIA PCI device id -> its pci.ids name (GFD's product under its vfio strategy).\n"
        "# GENERATED by scripts/gen_tables.py from tests/data/ids/pci.ids.tsv (see its README.md):"
        " do not edit.\ndevice_id\tname\n" + "".join(f"{d}\t{n}\n" for d, n in rows)
    )


def render(vendor: str) -> str:
    curated = tsv(f"curated-{vendor}.tsv")
    rows = {"nvidia": nvidia_rows, "amd": amd_rows, "intel": intel_rows}[vendor](curated)
    cols = list(rows[0])
    body: Iterator[str] = ("\t".join(r[c] for c in cols) for r in rows)
    return HEADERS[vendor] + "\t".join(cols) + "\n" + "\n".join(body) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    outputs = [(render(v), DATA / f"{v}.tsv") for v in ("nvidia", "amd", "intel")]
    extra = [(render_pci_names(), DATA / PCI_NAMES), (render_tegra(), DATA / TEGRA)]
    for text, path in [*outputs, *extra]:
        if check:
            if path.read_text("utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, "utf-8")
    if stale:
        print(
            "out of date (run python scripts/gen_tables.py): " + ", ".join(stale), file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
