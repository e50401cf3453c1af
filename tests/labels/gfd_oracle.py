"""GFD v0.19.0's labels for a fixture, derived from its recorded NVML answers (``nvml.json``)
and the sysfs files GFD reads, following GFD's own code (NVIDIA/k8s-device-plugin v0.19.0,
the version whose code judges the profile in tests/e2e/test_gfd_judge.py: ``internal/lm``
labelers, go-nvlib MIG profile names, ``api/config/v1`` sharing; the expected-output
regexes it is also checked against are v0.20.0's,
tests/data/nvidia/k8s-device-plugin_v0.20.0__tests__expected-output*.txt).
Written independently of nfd_gpu: it reads the recording, not a snapshot, so the profile's
code is checked against it, not against itself.

GFD merges its labelers in order and iterates Go maps where it picks among GPU models, so
:func:`gfd_outputs` returns every label map GFD can write (usually one). An empty map means
GFD writes nothing: NVML missing (it exits, ``--fail-on-init-error``), an NVML error on a GPU
(the pass fails), MPS sharing with MIG enabled (the pass fails).

``vgpu.*`` follow GFD's vGPU labeler (``internal/lm/vgpu.go``, ``internal/vgpu/pciutil.go``,
``vgpu.go``) over the fixture's ``sys/bus/pci/devices``: as GFD running privileged (its own
DaemonSet's ``privileged: true``), reading each config file whole.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# NVML GPU instance profile constants -> (slices, attribute suffix) (go-nvlib mig_profile.go)
GI_PROFILES = {0: (1, ""), 1: (2, ""), 2: (3, ""), 3: (4, ""), 4: (7, ""), 5: (8, ""),
               6: (6, ""), 7: (1, "+me"), 8: (2, "+me"), 9: (1, ""), 10: (1, "+gfx"),
               11: (2, "+gfx"), 12: (4, "+gfx"), 13: (1, "-me"), 14: (2, "-me"),
               15: (1, "+me.all"), 16: (2, "+me.all")}  # fmt: skip
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1, 8: 7}
MIG_ATTRS = (("memory", "memorySizeMB"), ("multiprocessors", "multiprocessorCount"),
             ("slices.gi", "gpuInstanceSliceCount"), ("slices.ci", "computeInstanceSliceCount"),
             ("engines.copy", "sharedCopyEngineCount"), ("engines.decoder", "sharedDecoderCount"),
             ("engines.encoder", "sharedEncoderCount"), ("engines.jpeg", "sharedJpegCount"),
             ("engines.ofa", "sharedOfaCount"))  # fmt: skip
NV = "nvidia.com/"


def sanitise(s: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_. -]", "", s).split())


def go_round(x: float) -> int:
    """Go's math.Round (half away from zero) for x >= 0."""
    return math.floor(x + 0.5)


def family(major: int, minor: int) -> str:
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor == 9 else "ampere"
    return {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
            10: "blackwell", 12: "blackwell", 13: "rubin"}.get(major, "undefined")  # fmt: skip


@dataclass(frozen=True)
class Sharing:
    """The device plugin's Sharing: ReplicatedResources() and SharingStrategy()."""

    resources: dict[str, tuple[int, bool]]  # name -> (replicas, renamed)
    strategy: str  # mps | time-slicing | none

    @staticmethod
    def load(path: Path | None) -> Sharing:
        doc = yaml.safe_load(path.read_text()) if path else {}
        sharing = (doc or {}).get("sharing") or {}
        blocks = {}
        for key in ("timeSlicing", "mps"):
            b = sharing.get(key)
            if b is not None:
                rename = bool(b.get("renameByDefault"))
                blocks[key] = {r["name"]: (r.get("replicas", 0), rename) for r in b["resources"]}

        def replicated(key: str) -> bool:
            return any(n > 1 for n, _ in blocks.get(key, {}).values())

        strategy = (
            "mps" if replicated("mps") else "time-slicing" if replicated("timeSlicing") else "none"
        )
        active = blocks.get("mps", blocks.get("timeSlicing", {}))
        return Sharing(active, strategy)

    def labels(self, resource: str, model: str, count: int, enabled: bool) -> dict[str, str]:
        """baseLabeler: product, count, replicas, sharing-strategy of one resource."""
        replicas, renamed = self.resources.get(resource, (0, False)) if enabled else (0, False)
        if enabled and replicas <= 0:
            replicas = 1
        shared = enabled and replicas > 1
        base = resource.removeprefix(NV)
        return {
            f"{base}.product": model + ("-SHARED" if shared and not renamed else ""),
            f"{base}.count": str(count),
            f"{base}.replicas": str(replicas),
            f"{base}.sharing-strategy": self.strategy if shared else "none",
        }


def _profile_name(dev: dict[str, Any], mig: dict[str, Any]) -> str:
    """go-nvlib MigProfileInfo.String() with '+' -> '.' (GFD nvml-mig-device.go GetName)."""
    gi = dev["gpuInstances"][str(mig["nvmlDeviceGetGpuInstanceId"])]
    gi_const = next(
        int(k) for k, p in dev["gpuInstanceProfiles"].items() if p["id"] == gi["profileId"]
    )
    ci = gi["computeInstances"][str(mig["nvmlDeviceGetComputeInstanceId"])]
    ci_const = next(
        int(k) for k, p in dev["computeInstanceProfiles"].items() if p["id"] == ci["profileId"]
    )
    g, suffix = GI_PROFILES[gi_const]
    c = CI_SLICES[ci_const]
    total = dev["nvmlDeviceGetMemoryInfo"]["total"]
    mem = dev["gpuInstanceProfiles"][str(gi_const)].get(
        "memorySizeMB", mig["nvmlDeviceGetAttributes"]["memorySizeMB"]
    )
    frac = math.ceil(mem * 2**20 / total * 8) / 8
    gb = go_round(frac * ((total + 2**30 - 1) // 2**30))
    name = f"{g}g.{gb}gb{suffix}" if c == g else f"{c}c.{g}g.{gb}gb{suffix}"
    return name.replace("+", ".")


class _Fail(Exception):
    """GFD's labelling pass fails: it writes nothing."""


def _pci_attr(dev: Path, name: str, key: str) -> str:
    """A sysfs attribute; a snapshot keeps ``uevent`` only, which holds the same values."""
    try:
        return (dev / name).read_text().strip()
    except FileNotFoundError:
        uevent = dict(x.split("=", 1) for x in (dev / "uevent").read_text().split() if "=" in x)
        return f"0x{uevent[key].split(':')[0].lower()}"


def _vgpu_labels(root: Path) -> dict[str, str]:
    """GFD's vGPU labeler: every NVIDIA PCI function's vendor capability (pciutil.go)."""
    devices = root / "sys/bus/pci/devices"
    vgpus = []
    for d in sorted(devices.iterdir()):  # os.ReadDir: sorted by name
        try:
            if _pci_attr(d, "vendor", "PCI_ID") != "0x10de":
                continue
            _pci_attr(d, "class", "PCI_CLASS")
            config = (d / "config").read_bytes()
        except (OSError, KeyError):
            return {}  # listing fails: logged, no vgpu labels
        if len(config) < 256:
            return {}  # "Please run GFD with privileged mode": no vgpu labels
        cap = None
        if config[0x06] & 0x10:
            visited, pos = set(), config[0x34]
            while pos != 0 and pos not in visited and config[pos] != 0xFF:
                if config[pos] == 0x09:
                    cap = config[pos : pos + config[pos + 2]]
                    break
                visited.add(pos)
                pos = config[pos + 1]
        if cap is not None and len(cap) >= 5 and cap[3:5] == b"VF":
            vgpus.append(cap)
    out = {"vgpu.present": "true" if vgpus else "false"}
    for cap in vgpus:  # GetInfo: walk the records to the host driver version record (id 0)
        pos = 5
        while pos + 1 < len(cap) and cap[pos] != 0:
            if cap[pos + 1] == 0:
                raise _Fail("a zero-length record: GFD's walk never ends")
            pos += cap[pos + 1]
        if pos >= len(cap) or cap[pos] != 0 or pos + 22 > len(cap):
            raise _Fail("cannot find driver version record")
        out["vgpu.host-driver-version"] = cap[pos + 2 : pos + 12].decode("latin-1").strip("\0")
        out["vgpu.host-driver-branch"] = cap[pos + 12 : pos + 22].decode("latin-1").strip("\0")
    return out


def gfd_outputs(
    root: Path, strategy: str = "none", sharing: Path | None = None
) -> list[dict[str, str]]:
    """Every label map GFD can write for this fixture (without gfd.timestamp)."""
    path = root / "nvml.json"
    if not path.exists():
        return [{}]  # no NVML: GFD exits (--fail-on-init-error, default true)
    rec = json.loads(path.read_text())
    devs = [
        d
        for d in rec["devices"]
        if d.get("nvmlDeviceGetName") not in ("DGX Display", "NVIDIA DGX Display")
    ]
    if not devs or any("error" in d for d in devs):
        return [{}]
    fabric = [d.get("nvmlDeviceGetGpuFabricInfo", {"error": "NotSupported"}) for d in devs]
    if any(f.get("error") not in (None, "NotSupported") for f in fabric):
        return [{}]  # IsFabricAttached fails: "error checking imex capability"
    try:
        vgpu = _vgpu_labels(root)
    except _Fail:
        return [{}]
    share = Sharing.load(sharing)
    mig_mode = [d["nvmlDeviceGetMigMode"] for d in devs]
    enabled = [isinstance(m, list) and m[0] == 1 for m in mig_mode]
    if share.strategy == "mps" and any(enabled):
        return [{}]  # isMPSCapable: "MPS sharing is not supported for mig devices"

    out: dict[str, str] = {}
    version = rec["nvmlSystemGetDriverVersion"]
    parts = version.split(".")
    out.update({"cuda.driver.major": parts[0], "cuda.driver.minor": parts[1],
                "cuda.driver.rev": parts[2] if len(parts) == 3 else "",
                "cuda.driver-version.major": parts[0], "cuda.driver-version.minor": parts[1],
                "cuda.driver-version.revision": parts[2] if len(parts) == 3 else "",
                "cuda.driver-version.full": version})  # fmt: skip
    cuda = rec["nvmlSystemGetCudaDriverVersion"]
    major, minor = cuda // 1000, cuda % 1000 // 10
    out.update({"cuda.runtime.major": str(major), "cuda.runtime.minor": str(minor),
                "cuda.runtime-version.major": str(major), "cuda.runtime-version.minor": str(minor),
                "cuda.runtime-version.full": f"{major}.{minor}"})  # fmt: skip
    try:
        machine = (root / "sys/class/dmi/id/product_name").read_text().strip()
    except OSError:
        machine = "unknown"
    out["gpu.machine"] = sanitise(machine)
    out["mig.capable"] = "true" if any(isinstance(m, list) for m in mig_mode) else "false"
    out["mps.capable"] = "true" if share.strategy == "mps" else "false"
    classes = set()
    for d in devs:
        bdf = root / "sys/bus/pci/devices" / d["nvmlDeviceGetPciInfo"]["busId"][-12:].lower()
        try:
            classes.add((bdf / "class").read_text().strip())
        except FileNotFoundError:  # a snapshot keeps uevent only: PCI_CLASS is the same value
            uevent = dict(x.split("=", 1) for x in (bdf / "uevent").read_text().split() if "=" in x)
            classes.add(f"0x{int(uevent['PCI_CLASS'], 16):06x}")
    out["gpu.mode"] = {"0x030000": "graphics", "0x030200": "compute"}.get(
        classes.pop() if len(classes) == 1 else "", "unknown"
    )
    # imex.go getFabricIDs over go-nvlib IsFabricAttached: state COMPLETED (3), a non-zero
    # cluster UUID, status SUCCESS; one cluster UUID and one clique id, else no label
    attached = [
        f for f in fabric
        if "error" not in f and f["state"] == 3 and any(f["clusterUuid"][:16]) and f["status"] == 0
    ]  # fmt: skip
    uuids = {str(uuid.UUID(bytes=bytes(f["clusterUuid"][:16]))) for f in attached}
    cliques = {str(f["cliqueId"]) for f in attached}
    if len(uuids) == 1 and len(cliques) == 1:
        out["gpu.clique"] = f"{uuids.pop()}.{cliques.pop()}"

    # newGPULabelers: one labeler per name, MIG-enabled names first, full GPUs last
    counts: dict[str, int] = {}
    last: dict[tuple[str, bool], dict[str, Any]] = {}
    for d, en in zip(devs, enabled, strict=True):
        counts[d["nvmlDeviceGetName"]] = counts.get(d["nvmlDeviceGetName"], 0) + 1
        last[(d["nvmlDeviceGetName"], en)] = d

    def gpu_labeler(name: str, en: bool) -> dict[str, str]:
        d = last[(name, en)]
        lab = share.labels(NV + "gpu", sanitise(name), counts[name], not en)
        mib = (
            d["nvmlDeviceGetMemoryInfo"]["total"] // 2**20
            if "total" in d.get("nvmlDeviceGetMemoryInfo", {})
            else 0
        )
        if mib:
            lab["gpu.memory"] = str(mib)
        cmaj, cmin = d["nvmlDeviceGetCudaComputeCapability"]
        if cmaj:
            lab.update({"gpu.family": family(cmaj, cmin), "gpu.compute.major": str(cmaj),
                        "gpu.compute.minor": str(cmin)})  # fmt: skip
        return lab

    mig_names = sorted({n for (n, en) in last if en})
    full_names = sorted({n for (n, en) in last if not en})
    results = []
    for order_m in itertools.permutations(mig_names):
        for order_f in itertools.permutations(full_names):
            labels = dict(out)
            for n in order_m:
                labels.update(gpu_labeler(n, True))
            for n in order_f:
                labels.update(gpu_labeler(n, False))
            labels.update(_mig_labels(devs, enabled, strategy, share))
            labels.update(vgpu)
            if labels not in results:
                results.append(labels)
    return [{NV + k: v for k, v in r.items()} for r in results]


def _mig_labels(
    devs: list[dict[str, Any]], enabled: list[bool], strategy: str, share: Sharing
) -> dict[str, str]:
    if strategy == "none":
        return {}
    out = {"mig.strategy": strategy}
    migs = [
        (d, m) for d, en in zip(devs, enabled, strict=True) if en for m in d.get("migDevices", [])
    ]
    resources: dict[str, tuple[dict[str, Any], dict[str, Any], int]] = {}
    for d, m in migs:
        name = _profile_name(d, m)
        first = resources.get(name, (d, m, 0))
        resources[name] = (first[0], first[1], first[2] + 1)
    if strategy == "single":
        if not any(enabled):
            return out
        empty = any(en and not d.get("migDevices") for d, en in zip(devs, enabled, strict=True))
        if empty or not all(enabled) or len(resources) != 1:
            model = sanitise(
                next(d for d, en in zip(devs, enabled, strict=True) if en)["nvmlDeviceGetName"]
            )
            invalid = {"product": f"{model}-MIG-INVALID", "count": "0", "replicas": "0",
                       "sharing-strategy": "", "memory": "0"}  # fmt: skip
            out.update({f"gpu.{k}": v for k, v in invalid.items()})
            return out
    for name, (d, m, n) in resources.items():
        resource = NV + ("gpu" if strategy == "single" else f"mig-{name}")
        model = f"{sanitise(d['nvmlDeviceGetName'])}-MIG-{name}"
        lab = share.labels(resource, model, n, True)
        base = resource.removeprefix(NV)
        attrs = m["nvmlDeviceGetAttributes"]
        lab.update({f"{base}.{label}": str(attrs[key]) for label, key in MIG_ATTRS})
        out.update(lab)
    return out
