"""The real-listing fixtures (tests/fixtures/specs/real_listings.py) give the labels the listing's
vendor tool printed there: product as the driver names it, family, compute capability, memory,
link and driver version, with NVML (its recorded answers) and without."""

from __future__ import annotations

import pytest

from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"


def labels(name: str, nvml: str = "auto") -> dict[str, str]:
    return run_scan(fixture_root(name), nvml=nvml).labels


def gpus(name: str) -> dict[str, object]:
    return {g.address: g for g in run_scan(fixture_root(name)).snapshot.gpus}


def test_rtx5090_rtx4090_as_nvidia_smi_printed() -> None:
    # nvidia-smi: Driver Version 580.82.09, CUDA Version 13.0, the two names and totals
    got = labels("real-rtx5090-rtx4090")
    assert got[f"{G}/nvidia.driver.version"] == "580.82.09"
    assert (got[f"{G}/nvidia.cuda.major"], got[f"{G}/nvidia.cuda.minor"]) == ("13", "0")
    assert got[f"{G}/product.NVIDIA-GeForce-RTX-5090.count"] == "1"
    assert got[f"{G}/product.NVIDIA-GeForce-RTX-4090.count"] == "1"
    by = gpus("real-rtx5090-rtx4090")
    r5090, r4090 = by["0000:01:00.0"], by["0000:02:00.0"]
    assert (r5090.product, r5090.memory_mib, r5090.family) == (  # type: ignore[attr-defined]
        "NVIDIA GeForce RTX 5090",
        32607,
        "blackwell",
    )
    assert (r4090.product, r4090.memory_mib, r4090.family) == (  # type: ignore[attr-defined]
        "NVIDIA GeForce RTX 4090",
        24564,
        "ada-lovelace",
    )
    cc = {a: (g.nvidia.compute_major, g.nvidia.compute_minor) for a, g in by.items()}  # type: ignore[attr-defined]
    assert cc == {"0000:01:00.0": (12, 0), "0000:02:00.0": (8, 9)}  # CUDA GPUs table


def test_gb10_on_grace() -> None:
    # nvidia-smi: NVIDIA GB10 at 0000000F:01:00.0, 580.95.05 / CUDA 13.0, memory Not Supported
    got = labels("real-gb10-spark")
    assert got[f"{G}/product"] == "NVIDIA-GB10"
    assert got[f"{G}/family"] == "blackwell"
    assert (got[f"{G}/compute.major"], got[f"{G}/compute.minor"]) == ("12", "1")
    assert got[f"{G}/nvidia.driver.version"] == "580.95.05"
    assert (got[f"{G}/nvidia.cuda.major"], got[f"{G}/nvidia.cuda.minor"]) == ("13", "0")
    assert f"{G}/memory-mib" not in got  # NVML has no memory total on the GB10
    assert list(gpus("real-gb10-spark")) == ["000f:01:00.0"]  # bridges, NVMe, NIC not counted


def test_v100_on_aws() -> None:
    # nvidia-smi -q: Driver Version 390.30, Product Name Tesla V100-SXM2-16GB at 00:1E.0
    got = labels("real-v100-aws")
    assert got[f"{G}/product"] == "Tesla-V100-SXM2-16GB"
    assert got[f"{G}/family"] == "volta"
    assert (got[f"{G}/compute.major"], got[f"{G}/compute.minor"]) == ("7", "0")
    assert got[f"{G}/nvidia.driver.version"] == "390.30"
    (gpu,) = gpus("real-v100-aws").values()
    assert gpu.uuid == "GPU-8e2712fe-6590-250e-8b90-280dbc470b41"  # type: ignore[attr-defined]


def test_mi350x_as_amd_smi_printed() -> None:
    # amd-smi static: MARKET_NAME, NUM_COMPUTE_UNITS 128, gfx950, 32 GT/s x16, amdgpu 6.18.3
    got = labels("real-mi350x")
    assert got[f"{G}/product"] == "AMD-Instinct-MI350X"
    assert got[f"{G}/family"] == "cdna4"
    assert got[f"{G}/amd.gfx"] == "gfx950"
    assert got[f"{G}/compute-units"] == "128"
    assert (got[f"{G}/pcie.gen"], got[f"{G}/pcie.width"]) == ("5", "16")
    assert got[f"{G}/amd.driver.version"] == "6.18.3"


def test_rx7900xtx_as_lact_printed() -> None:
    # lact cli info: AMD Radeon RX 7900 XTX, 24560 MiB, GFX1100, 96 CUs, 16.0 GT/s PCIe x16
    got = labels("real-rx7900xtx")
    assert got[f"{G}/product"] == "AMD-Radeon-RX-7900-XTX"
    assert got[f"{G}/family"] == "rdna3"
    assert got[f"{G}/amd.gfx"] == "gfx1100"
    assert got[f"{G}/memory-mib"] == "24560"
    assert got[f"{G}/compute-units"] == "96"
    assert (got[f"{G}/pcie.gen"], got[f"{G}/pcie.width"]) == ("4", "16")


def test_b580_on_xe() -> None:
    # xe's dmesg: BATTLEMAGE e20b on xe at 0000:03:00.0, discrete, no SR-IOV
    got = labels("real-b580-xe")
    assert got[f"{G}/product"] == "Intel-Arc-B580"  # Level Zero's name for e20b
    assert got[f"{G}/family"] == "xe2"
    assert got[f"{G}/driver"] == "xe"
    assert got[f"{G}/sriov.capable"] == "false"


def test_laptop_igpu_and_dgpu() -> None:
    # inxi: UHD (8086:9bc4, i915) + GTX 1660 Ti Mobile (10de:2191, nvidia 515.43.04,
    # gen 1 x16 of gen 3 x16: the link idles at 2.5 GT/s, which is no loss)
    got = labels("real-laptop-cml-1660ti")
    assert got[f"{G}/count"] == "2"
    assert (got[f"{G}/intel.count"], got[f"{G}/nvidia.count"]) == ("1", "1")
    assert got[f"{G}/family"] == "mixed"  # gen9 and turing
    assert got[f"{G}/nvidia.driver.version"] == "515.43.04"
    assert (got[f"{G}/pcie.gen"], got[f"{G}/pcie.width"]) == ("3", "16")  # what it can do
    assert f"{G}/pcie.degraded" not in got  # 2.5 GT/s of 8 GT/s: idle
    by = gpus("real-laptop-cml-1660ti")
    assert by["0000:00:02.0"].family == "gen9"  # type: ignore[attr-defined]
    assert by["0000:01:00.0"].family == "turing"  # type: ignore[attr-defined]


def test_gb200_on_grace_vfio_variant_driver() -> None:
    # lspci -nnkk: three 10de:2941 (subsystem 10de:2046) on nvgrace_gpu_vfio_pci, Grace's VFIO
    # variant driver: passed through whole, as on vfio-pci
    got = labels("real-gb200-vfio")
    assert got[f"{G}/count"] == "3"
    assert got[f"{G}/driver"] == "nvgrace_gpu_vfio_pci"
    assert got[f"{G}/mode"] == "pf-passthrough"
    assert got[f"{G}/product"] == "NVIDIA-GB200"  # README: 2941 10de:2046 "NVIDIA GB200"
    assert got[f"{G}/family"] == "blackwell"
    assert list(gpus("real-gb200-vfio")) == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0"]
    assert {g.mode for g in gpus("real-gb200-vfio").values()} == {"pf-passthrough"}  # type: ignore[attr-defined]


NVIDIA_REAL = ["real-rtx5090-rtx4090", "real-gb10-spark", "real-v100-aws"]
STABLE = ("product", "family", "compute.major", "compute.minor")


@pytest.mark.parametrize("name", NVIDIA_REAL)
def test_product_family_compute_same_without_nvml(name: str) -> None:
    with_nvml, without = labels(name), labels(name, nvml="off")

    def pick(got: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in got.items() if k.split("/", 1)[1].startswith(STABLE)}

    assert pick(with_nvml) == pick(without)
    assert pick(with_nvml)  # the labels exist
