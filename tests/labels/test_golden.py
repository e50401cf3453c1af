"""Golden label maps for every fixture, plus the acceptance facts of each fixture."""

from __future__ import annotations

import pytest

from nfd_gpu.labels.options import PROFILE_OPTIONS
from nfd_gpu.labels.registry import PROFILES
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, GOLDEN, fixture_root

G = "gpu.feature.node.kubernetes.io"


def read_golden(name: str) -> dict[str, str]:
    out = {}
    for line in (GOLDEN / f"{name}.labels").read_text().splitlines():
        k, _, v = line.partition("=")
        out[k] = v
    return out


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_golden_labels(name: str) -> None:
    assert run_scan(fixture_root(name)).labels == read_golden(name)


def test_every_fixture_has_a_golden_file() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.labels") if "." not in p.stem) == ALL_FIXTURES


VENDOR_PROFILES = [p for p in PROFILES if p != "neutral"]


@pytest.mark.parametrize("profile", VENDOR_PROFILES)
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_vendor_profile_golden_labels(name: str, profile: str) -> None:
    """Vendor profiles have a golden file wherever they emit anything."""
    labels = run_scan(fixture_root(name), profiles=(profile,)).labels
    path = GOLDEN / f"{name}.{profile}.labels"
    if not labels:
        assert not path.exists()
        return
    assert labels == read_golden(f"{name}.{profile}")


# every amd option that adds labels (amd-require-amdgpu and amd-no-<kind> remove them:
# test_profile_options.py, test_amd_labeller_oracle.py)
AMD_ALL = tuple(
    o
    for o, (p, _) in PROFILE_OPTIONS.items()
    if p == "amd" and o != "amd-require-amdgpu" and not o.startswith("amd-no-")
)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_amd_profile_with_every_option(name: str) -> None:
    """The labeller with every flag (and the KubeVirt labeller's gpu.mode): golden
    ``<fixture>.amd-all.labels`` wherever the amd profile emits anything."""
    labels = run_scan(fixture_root(name), profiles=("amd",), profile_options=AMD_ALL).labels
    path = GOLDEN / f"{name}.amd-all.labels"
    if not labels:
        assert not path.exists()
        return
    assert labels == read_golden(f"{name}.amd-all")
    default = run_scan(fixture_root(name), profiles=("amd",)).labels
    assert set(default) < set(labels)
    assert all(labels[k] == v for k, v in default.items())


def test_amd_beta_copies() -> None:
    """createLabels: beta.amd.com/gpu.<kind>.<value>=<count> always, the plain beta key with
    one value; on the CPX node the counts are partitions (8 GPUs x 8)."""
    labels = run_scan(
        fixture_root("mi300x-cpx-nps4"), profiles=("amd",), profile_options=("amd-beta",)
    ).labels
    assert labels["beta.amd.com/gpu.simd-count.152"] == "64"
    assert labels["beta.amd.com/gpu.simd-count"] == "152"
    assert labels["amd.com/gpu.simd-count"] == "152"
    assert "beta.amd.com/gpu.driver-version" not in labels


def test_amd_flag_gated_keys() -> None:
    root = fixture_root("mi300x-cpx-nps4")
    on = (
        "amd-driver-version",
        "amd-compute-memory-partition",
        "amd-compute-partitioning-supported",
        "amd-memory-partitioning-supported",
        "amd-mode",
    )
    labels = run_scan(root, profiles=("amd",), profile_options=on).labels
    assert labels["amd.com/gpu.compute-memory-partition"] == "cpx_nps4"
    assert labels["amd.com/gpu.compute-partitioning-supported"] == "true"
    assert labels["amd.com/gpu.memory-partitioning-supported"] == "true"
    assert labels["amd.com/gpu.driver-version"] == "6.10.5"
    assert labels["amd.com/gpu.mode"] == "container"
    default = run_scan(root, profiles=("amd",)).labels
    assert not any("partition" in k or "driver" in k or "mode" in k for k in default)


def test_amd_labeller_value_semantics() -> None:
    from nfd_gpu.labels.amd import product_name

    assert product_name(" AMD Instinct MI300X (VF) ") == "AMD_Instinct_MI300X_VF"
    assert product_name("AMD Instinct MI250X / MI250") == "AMD_Instinct_MI250X_/_MI250"
    # KFD mem_banks/0 size_in_bytes 0 on the VF guest -> vram=0G (the labeller's rounding)
    vf = run_scan(fixture_root("mi300x-vf-guest"), profiles=("amd",)).labels
    assert vf["amd.com/gpu.vram"] == "0G"


def test_mi210_amd_profile_matches_labeller_formulas() -> None:
    """AMD labeller formulas on the KFD capture: simd_count 416, simd_per_cu 4 -> 104 CUs;
    vram = round(MiB / 1024) G of KFD mem_banks/0, which this capture does not include (the
    labeller writes no vram label then; mem_info_vram_total is not its source)."""
    labels = run_scan(fixture_root("mi210-8x"), profiles=("amd",)).labels
    assert "amd.com/gpu.vram" not in labels
    assert labels["amd.com/gpu.cu-count"] == "104"
    assert labels["amd.com/gpu.simd-count"] == "416"
    assert labels["amd.com/gpu.device-id"] == "740f"
    assert labels["amd.com/gpu.product-name"] == "Instinct_MI210"
    assert labels["amd.com/gpu.family"] == "AI"
    assert "amd.com/gpu.driver-version" not in labels  # labeller flag, not in the DaemonSet


def test_hgx_h100() -> None:
    r = run_scan(fixture_root("hgx-h100"))
    labels = r.labels
    assert labels[f"{G}/count"] == "8"
    assert labels[f"{G}/vendor"] == "nvidia"
    assert labels[f"{G}/product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels[f"{G}/family"] == "hopper"
    assert labels[f"{G}/compute.major"] == "9"
    assert labels[f"{G}/interconnect.nvswitch"] == "true"
    # The ASPEED BMC VGA and the four NVSwitches are seen but never counted.
    addrs = {g.address for g in r.snapshot.gpus}
    assert "0000:02:00.0" not in addrs
    assert len(r.snapshot.nvswitches) == 4
    assert not addrs & set(r.snapshot.nvswitches)
    assert {g.numa_node for g in r.snapshot.gpus} == {0, 1}
    assert r.warnings == []


def test_mi210() -> None:
    labels = run_scan(fixture_root("mi210-8x")).labels
    assert labels[f"{G}/count"] == "8"
    assert labels[f"{G}/vendor"] == "amd"
    assert labels[f"{G}/family"] == "cdna2"
    assert labels[f"{G}/amd.gfx"] == "gfx90a"
    assert labels[f"{G}/interconnect.xgmi"] == "true"
    assert labels[f"{G}/compute-units"] == "104"


def test_flex170_counts_pf_once_and_reports_vfs() -> None:
    r = run_scan(fixture_root("flex170-sriov"))
    assert r.labels[f"{G}/count"] == "1"
    assert r.labels[f"{G}/sriov.capable"] == "true"
    assert r.labels[f"{G}/sriov.vfs"] == "8"
    (gpu,) = r.snapshot.gpus
    assert len(gpu.vfs) == 8
    assert gpu.sriov_totalvfs == 31


def test_passthrough_mode() -> None:
    labels = run_scan(fixture_root("passthrough-host")).labels
    assert labels[f"{G}/mode"] == "pf-passthrough"
    assert labels[f"{G}/driver"] == "vfio-pci"


def test_vm_has_no_gpu_labels() -> None:
    r = run_scan(fixture_root("vm-no-gpu"))
    assert not [k for k in r.labels if k.startswith(f"{G}/")]
    assert len(r.snapshot.pci) == 6


def test_workstation_audio_function_not_counted() -> None:
    r = run_scan(fixture_root("workstation-rtx4090"))
    assert r.labels[f"{G}/count"] == "2"  # RTX 4090 + Intel iGPU, not the HDMI audio
    assert r.labels[f"{G}/nvidia.count"] == "1"
    assert r.labels[f"{G}/intel.count"] == "1"
    assert r.labels[f"{G}/vendor"] == "mixed"
    assert "0000:01:00.1" not in {g.address for g in r.snapshot.gpus}


def test_broken_tree_warns() -> None:
    r = run_scan(fixture_root("broken"))
    text = "\n".join(r.warnings)
    assert "is a directory, expected a file" in text
    assert "not a hex id" in text
    assert "not a PCI address" in text
    assert "0000:09:00.0: skipped" in text  # dangling device link


def test_mi300x_cpx_nps4_partitions() -> None:
    r = run_scan(
        fixture_root("mi300x-cpx-nps4"),
        profiles=("neutral", "amd"),
        profile_options=("amd-compute-memory-partition",),
    )
    labels = r.labels
    assert labels[f"{G}/count"] == "8"
    assert labels[f"{G}/partitions"] == "64"
    assert labels[f"{G}/partition.compute"] == "cpx"
    assert labels[f"{G}/partition.memory"] == "nps4"
    assert labels["amd.com/gpu.compute-memory-partition"] == "cpx_nps4"
    assert labels["amd.com/gpu.cu-count"] == "38"  # per partition, as the labeller counts
    assert len(r.snapshot.partitions) == 64
    assert {p.compute_units for p in r.snapshot.partitions} == {38}
    assert {g.compute_units for g in r.snapshot.gpus} == {304}
    assert r.warnings == []


def test_mixed_nvidia_amd() -> None:
    labels = run_scan(fixture_root("mixed-nvidia-amd")).labels
    assert labels[f"{G}/vendor"] == "mixed"
    assert labels[f"{G}/nvidia.count"] == "2"
    assert labels[f"{G}/amd.count"] == "2"
    assert labels[f"{G}/memory-mib"] == "65536"  # MI210 64 GiB < H100 80 GB
