"""AMD k8s-node-labeller's labels for a fixture, derived from the sysfs files the labeller
reads, following its code as read in ROCm/k8s-device-plugin ``cmd/k8s-node-labeller/main.go``
and ``internal/pkg/amdgpu/amdgpu.go`` (keys: docs/labels-amd.md, docs/migration.md). Written
independently of nfd_gpu: it walks the fixture's files the labeller's way.

* Devices (``GetAMDGPUs``): ``sys/module/amdgpu/drivers/pci:amdgpu/<BDF>`` (a GPU whose
  ``numa_node`` is unreadable is skipped), then ``sys/devices/platform/amdgpu_xcp_*`` kept
  when their render node is in KFD; ``card`` / ``renderD`` / ``devID`` carry over between
  loop iterations as in the Go code. No ``sys/module/amdgpu/drivers``: it exits (no labels).
* libdrm (``family``, the marketing name) opens ``/dev/dri/card<N>`` after checking
  ``sys/class/drm/card<N>/device/vendor`` is ``0x1002``; the family id comes from the
  hardware, which a fixture has not: it is taken from the KFD ISA target with
  ``nfd_gpu.labels.amd.GFX_FAMILY`` (libdrm's family names, data, not logic). The marketing
  name is looked up in the labeller's vendored ``amdgpu.ids`` (tests/data/amd/).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

from nfd_gpu.labels.amd import GFX_FAMILY
from tests.conftest import DATA

IDS = DATA / "amd" / "amdgpu.ids"
ALL_FLAGS = ("vram", "cu-count", "simd-count", "device-id", "family", "product-name",
             "driver-version", "compute-memory-partition", "compute-partitioning-supported",
             "memory-partitioning-supported", "driver-src-version")  # fmt: skip
DAEMONSET_FLAGS = ALL_FLAGS[:6]  # k8s-ds-amdgpu-labeller.yaml args
HELM_FLAGS = ALL_FLAGS[:5]  # helm/amd-gpu/templates/labeller.yaml args: no -product-name


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _prop(path: Path, key: str) -> int | None:
    """ParseTopologyProperties: the first ``key\\s(\\d+)`` match, parsed as an integer."""
    m = re.search(rf"{key}\s(\d+)", _read(path) or "")
    return int(m.group(1)) if m else None


def _kfd(root: Path) -> list[Path]:
    return sorted((root / "sys/class/kfd/kfd/topology/nodes").glob("*/properties"))


def _devices(root: Path) -> list[dict[str, object]] | None:
    if not (root / "sys/module/amdgpu/drivers").exists():
        return None  # glog.Fatalf: "amdgpu driver unavailable"
    render_dev: dict[int, str] = {}
    for f in _kfd(root):
        minor = _prop(f, "drm_render_minor")
        loc, dom = _prop(f, "location_id"), _prop(f, "domain")
        if minor and minor > 0 and loc is not None and dom is not None:
            render_dev[minor] = f"{dom:04x}:{(loc >> 8) & 0xFF:02x}:{(loc >> 3) & 0x1F:02x}:0"
    devices: list[dict[str, object]] = []
    card, render, dev_id = 0, 128, ""
    pattern = re.compile(r"[0-9a-fA-F]{4}:")
    gpus = sorted((root / "sys/module/amdgpu/drivers/pci:amdgpu").iterdir())
    for path in (p for p in gpus if pattern.match(p.name)):
        cp = (_read(path / "current_compute_partition") or "").strip().lower()
        mp = (_read(path / "current_memory_partition") or "").strip().lower()
        try:
            int((_read(path / "numa_node") or "").strip())
        except ValueError:
            continue
        for d in sorted((path / "drm").glob("*")):
            if d.name.startswith("card"):
                card = int(d.name[4:])
            elif d.name.startswith("renderD"):
                render = int(d.name[7:])
                dev_id = render_dev.get(render, dev_id)
        devices.append({"card": card, "render": render, "dev": dev_id, "cp": cp, "mp": mp})
    for path in sorted((root / "sys/devices/platform").glob("amdgpu_xcp_*")):
        cp = mp = ""
        numa = False
        for d in sorted((path / "drm").glob("*")):
            if d.name.startswith("card"):
                card = int(d.name[4:])
            elif d.name.startswith("renderD"):
                render = int(d.name[7:])
                dev_id = render_dev.get(render, dev_id)
                parent = next(
                    (g for g in devices if g["dev"] == dev_id and g["cp"] and g["mp"]), None
                )
                if parent:
                    cp, mp, numa = str(parent["cp"]), str(parent["mp"]), True
        if render in render_dev and numa:
            devices.append({"card": card, "render": render, "dev": dev_id, "cp": cp, "mp": mp})
    return devices


def _libdrm_ok(root: Path, card: object) -> bool:
    """``AMDGPU(card)``; the DaemonSet mounts the host's /dev, so ``dev/dri/card<N>`` opens
    on a real node (fixtures often carry no dev/ tree)."""
    vendor = _read(root / f"sys/class/drm/card{card}/device/vendor")
    return (vendor or "").strip() == "0x1002"


def _marketing_name(root: Path, card: object) -> str | None:
    dev = (_read(root / f"sys/class/drm/card{card}/device/device") or "").strip().removeprefix("0x")
    rev = (
        (_read(root / f"sys/class/drm/card{card}/device/revision") or "").strip().removeprefix("0x")
    )
    for line in IDS.read_text().splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[0].lower() == dev.lower() and parts[1].lower() == rev.lower():
            return parts[2]
    return None


def _kfd_node(root: Path, render: object) -> Path | None:
    return next((f for f in _kfd(root) if _prop(f, "drm_render_minor") == render), None)


def _create(kind: str, counts: Counter[str]) -> dict[str, str]:
    out = {f"beta.amd.com/gpu.{kind}.{k}": str(v) for k, v in counts.items()}
    if len(counts) == 1:
        ((k, _),) = counts.items()
        out[f"beta.amd.com/gpu.{kind}"] = k
        out[f"amd.com/gpu.{kind}"] = k
    else:
        out.update({f"amd.com/gpu.{kind}.{k}": str(v) for k, v in counts.items()})
    return out


def labeller_output(root: Path, flags: tuple[str, ...] = DAEMONSET_FLAGS) -> dict[str, str]:
    """The labels the labeller writes with these flags ({} when it exits)."""
    devices = _devices(root)
    if devices is None:
        return {}
    out: dict[str, str] = {}
    counts: dict[str, Counter[str]] = {k: Counter() for k in ALL_FLAGS[:6]}
    for d in devices:
        dev = root / f"sys/class/drm/card{d['card']}/device"
        device_id = _read(dev / "device")
        if device_id is not None:
            counts["device-id"][device_id.strip().removeprefix("0x")] += 1
        name = (_read(dev / "product_name") or "").strip()
        name = name.replace(" ", "_").replace("(", "").replace(")", "")
        if not name and _libdrm_ok(root, d["card"]):
            raw = _marketing_name(root, d["card"]) or ""
            name = raw.strip().replace(" ", "_").replace("(", "").replace(")", "")
        if name:
            counts["product-name"][name] += 1
        node = _kfd_node(root, d["render"])
        if _libdrm_ok(root, d["card"]) and node is not None:
            gfx = _prop(node, "gfx_target_version") or 0
            target = f"gfx{gfx // 10000 % 100}{gfx // 100 % 100}{gfx % 100:x}"
            if target in GFX_FAMILY:
                counts["family"][GFX_FAMILY[target]] += 1
        if node is not None:
            size = _prop(node.parent / "mem_banks/0/properties", "size_in_bytes")
            if size is not None:
                counts["vram"][f"{math.floor(size // 2**20 / 1024 + 0.5)}G"] += 1
            simd, per_cu = _prop(node, "simd_count"), _prop(node, "simd_per_cu")
            if simd is not None:
                counts["simd-count"][str(simd)] += 1
                if per_cu:
                    counts["cu-count"][str(simd // per_cu)] += 1
    for kind, c in counts.items():
        if kind in flags and c:
            out.update(_create(kind, c))
    for flag, attr in (("driver-version", "version"), ("driver-src-version", "srcversion")):
        if flag in flags:  # the first device whose driver's module has the file
            versions = [
                _read(root / f"sys/class/drm/card{d['card']}/device/driver/module/{attr}")
                for d in devices
            ]
            out[f"amd.com/gpu.{flag}"] = next((v.strip() for v in versions if v is not None), "")
    if "compute-memory-partition" in flags:
        combos = Counter(f"{d['cp']}_{d['mp']}" for d in devices if d["cp"] and d["mp"])
        if len(combos) == 1:
            out["amd.com/gpu.compute-memory-partition"] = next(iter(combos))
    gpus = sorted(
        (root / "sys/module/amdgpu/drivers/pci:amdgpu").glob(
            "[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]:*"
        )
    )
    for kind in ("compute", "memory"):
        if f"{kind}-partitioning-supported" in flags:
            has = bool(gpus) and (gpus[0] / f"available_{kind}_partition").exists()
            out[f"amd.com/gpu.{kind}-partitioning-supported"] = "true" if has else "false"
    return out
