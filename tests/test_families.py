"""Families derived before omitting (nfd_gpu/catalog/families.py, discovery/identify.py):
GFD's compute-capability mapping, the AMD ISA targets, agreement with the model tables,
``mixed`` across vendors, and the unknown-GPU warning of ``scan``."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from nfd_gpu.catalog import tables
from nfd_gpu.catalog.families import amd_family, nvidia_family, vocabulary
from nfd_gpu.discovery.identify import unknown_warnings, with_family
from nfd_gpu.model import AmdGpu, Gpu, NvidiaGpu, Snapshot
from nfd_gpu.scan import run_scan
from nfd_gpu.summary import node_summary
from tests.conftest import nfd_gpu_cmd
from tests.fixtures.specs.amd import mi210
from tests.fixtures.specs.common import build
from tests.fixtures.specs.nvidia import workstation


@pytest.mark.parametrize(
    ("cc", "family"),
    [
        ((3, 7), "kepler"), ((5, 2), "maxwell"), ((6, 0), "pascal"), ((6, 1), "pascal"),
        ((7, 0), "volta"), ((7, 2), "volta"), ((7, 5), "turing"), ((8, 0), "ampere"),
        ((8, 6), "ampere"), ((8, 7), "ampere"), ((8, 9), "ada-lovelace"), ((9, 0), "hopper"),
        ((10, 0), "blackwell"), ((10, 3), "blackwell"), ((12, 0), "blackwell"),
        ((12, 1), "blackwell"), ((13, 0), "rubin"), ((4, 0), None), ((11, 0), None),
    ],
)  # fmt: skip
def test_nvidia_family_is_gfds_get_arch_family(cc: tuple[int, int], family: str | None) -> None:
    assert nvidia_family(*cc) == family


def test_amd_family_from_named_targets_only() -> None:
    assert amd_family("gfx942") == "cdna3"
    assert amd_family("gfx90a") == "cdna2"
    assert amd_family("gfx1201") == "rdna4"
    assert amd_family("gfx1151") == "rdna3.5"
    assert amd_family("gfx803") is None  # Fiji (GCN3) and Polaris (GCN4) share it
    assert amd_family("gfx1199") is None  # no range guessing
    assert amd_family(None) is None


def test_table_families_agree_with_the_derivations() -> None:
    """Where a table row has both, its family is the one its compute capability / ISA
    target derives: with and without the table the family is the same."""
    for rows in tables.table("nvidia").values():
        for r in rows:
            if r.family and r.compute_major is not None and r.compute_minor is not None:
                assert nvidia_family(r.compute_major, r.compute_minor) == r.family, r
    for rows in tables.table("amd").values():
        for r in rows:
            if r.family and amd_family(r.gfx):
                assert amd_family(r.gfx) == r.family, r


def test_every_producible_family_is_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs/labels.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `G/family`"))
    for families in vocabulary().values():
        for f in families:
            assert f"`{f}`" in row, f
    assert "`maxwell`" in row and "`pascal`" in row


def _gpu(vendor: str, family: str | None = None, **kw: object) -> Gpu:
    vid = {"nvidia": "10de", "amd": "1002", "intel": "8086"}[vendor]
    return Gpu(address="0000:01:00.0", vendor=vendor, vendor_id=vid, device_id="ffff",
               class_id="030000", family=family, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_family_derived_from_nvml_compute_capability() -> None:
    g = _gpu("nvidia", nvidia=NvidiaGpu(compute_major=6, compute_minor=0),
             provenance={"compute_capability": "nvml"})  # fmt: skip
    d = with_family(g)
    assert (d.family, d.provenance["family"]) == ("pascal", "nvml")
    a = with_family(_gpu("amd", amd=AmdGpu(gfx="gfx1100"), provenance={"gfx": "kfd"}))
    assert (a.family, a.provenance["family"]) == ("rdna3", "kfd")
    table = _gpu("nvidia", "hopper", nvidia=NvidiaGpu(compute_major=6, compute_minor=0))
    assert with_family(table).family == "hopper"  # the table's family is kept


def test_other_vendors_never_share_a_family() -> None:
    """A laptop with a known iGPU and an unknown dGPU is ``mixed``, not unlabelled."""
    igpu = dataclasses.replace(_gpu("intel", "xe-lpg"), address="0000:00:02.0")
    snap = Snapshot(root="/", gpus=(igpu, _gpu("nvidia")))
    assert node_summary(snap)["family"] == "mixed"
    one_vendor = Snapshot(root="/", gpus=(_gpu("nvidia", "ampere"), _gpu("nvidia")))
    assert "family" not in node_summary(one_vendor)


def test_one_warning_per_distinct_ids() -> None:
    gpus = tuple(dataclasses.replace(_gpu("nvidia"), address=f"0000:0{i}:00.0") for i in (1, 2))
    (w,) = unknown_warnings(gpus)
    assert "(10de:ffff, subsystem ?:?, revision ?) at 0000:01:00.0, 0000:02:00.0" in w


def test_scan_warns_about_an_unknown_gpu_and_labels_the_rest(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """The workstation fixture with its dGPU's device id replaced by one no table has
    (0xffff is no device: PCI reserves it), and the NVIDIA driver state removed."""
    spec = workstation()
    dgpu = next(d for d in spec.devices if d.vendor == 0x10DE and d.cls == 0x030000)
    dgpu.device = 0xFFFF
    root = build(dataclasses.replace(spec, name="unknown-dgpu"), tmp_path)
    p = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--root", str(root), "--nvml", "off"],
        capture_output=True, text=True, env=subprocess_env, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    warnings = [line for line in p.stderr.splitlines() if "unknown GPU" in line]
    assert warnings == [
        "warning: unknown GPU (10de:ffff, subsystem 1043:889d, revision a1) at 0000:01:00.0: "
        "NVIDIA Device ffff is in no nfd-gpu table and its family could not be derived, so "
        "family labels are omitted; please report it with these ids and the output of "
        "`nfd-gpu snapshot DIR` (docs/labels.md, 'Unknown GPUs')"
    ]
    labels = dict(line.split("=", 1) for line in p.stdout.splitlines())
    g = "gpu.feature.node.kubernetes.io"
    assert labels[f"{g}/count"] == "2"
    assert labels[f"{g}/family"] == "mixed"  # Intel's iGPU is known, vendors differ
    assert labels[f"{g}/intel.count"] == "1" and labels[f"{g}/nvidia.count"] == "1"
    assert labels[f"{g}/product.NVIDIA-Device-ffff.count"] == "1"
    assert labels[f"{g}/pcie.gen"] == "4"


def test_amd_family_from_kfd_when_the_table_has_no_row(tmp_path: Path) -> None:
    """The MI210 node (real KFD topology: gfx_target_version 90010) with its GPUs' device id
    replaced by one no table has (0xffff, reserved): family ``cdna2`` comes from KFD's ISA
    target, provenance ``kfd``, and no GPU is unknown."""
    spec = mi210()
    for d in spec.devices:
        if d.vendor == 0x1002:
            d.device = 0xFFFF
    root = build(dataclasses.replace(spec, name="mi210-unlisted"), tmp_path)
    result = run_scan(root)
    amd = [g for g in result.snapshot.gpus if g.vendor == "amd"]
    assert len(amd) == 8
    assert {(g.amd.gfx, g.family, g.provenance["family"]) for g in amd} == {
        ("gfx90a", "cdna2", "kfd")
    }
    assert result.labels["gpu.feature.node.kubernetes.io/family"] == "cdna2"
    assert not [w for w in result.warnings if w.startswith("unknown GPU")]
