"""A VM whose GPU sits in a 32-bit PCI domain (Azure / Hyper-V; fixture hyperv-p100-vm from
NVIDIA/nvidia-docker#1316): NVML (``03F8F31A:00:00.0``), procfs and sysfs
(``3f8f31a:00:00.0``) name one function, so every driver fact reaches its GPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root
from tests.fixtures import make_fixtures as mf

G = "gpu.feature.node.kubernetes.io"


def test_every_nvml_fact_reaches_the_gpu() -> None:
    result = run_scan(fixture_root("hyperv-p100-vm"))
    (g,) = result.snapshot.gpus
    assert g.address == "3f8f31a:00:00.0"
    assert g.uuid == "GPU-cb2fd7b9-a1d8-b47e-b331-2abe34b99a02"  # nvidia-smi -q there
    assert {
        k: g.provenance[k] for k in ("product", "uuid", "memory_mib", "compute_capability")
    } == {
        "product": "nvml",
        "uuid": "nvml",
        "memory_mib": "nvml",
        "compute_capability": "nvml",
    }
    labels = result.labels
    # what nvidia-smi printed in the listing (product, virtualization, link) and the facts
    # the spec cites (compute capability, memory)
    expected = {
        "product": "Tesla-P100-PCIE-16GB",
        "virtualization": "passthrough",
        "pcie.gen": "3",
        "pcie.width": "16",
        "compute.major": "6",
        "compute.minor": "0",
        "family": "pascal",
        "memory-mib": "16384",
        "mig.capable": "false",
        "mig.enabled": "false",
    }
    assert {k: labels.get(f"{G}/{k}") for k in expected} == expected
    assert not [w for w in result.warnings if "unknown GPU" in w]


def _as_domain_zero(tmp_path: Path) -> Path:
    """The same VM with the GPU in domain 0 (sysfs 0000:00:00.0, NVML 00000000:00:00.0)."""
    spec = mf.hyperv_p100_vm()
    narrow = "0000:00:00.0"
    files = {
        k.replace(mf.HV_P100_ADDR, narrow): v.replace(mf.HV_P100_ADDR, narrow).replace(
            "03F8F31A:00:00.0", "00000000:00:00.0"
        )
        for k, v in spec.files.items()
    }
    devices = [dataclasses.replace(spec.devices[0], addr=narrow)]
    return mf.build(dataclasses.replace(spec, devices=devices, files=files), tmp_path)


def test_the_wide_domain_loses_no_label(tmp_path: Path) -> None:
    """Every label (neutral and the nvidia profile's) of the GPU in domain 0 is there, the
    same, for the GPU in the 32-bit domain."""
    narrow, wide = _as_domain_zero(tmp_path), fixture_root("hyperv-p100-vm")
    for profiles in (("neutral",), ("nvidia",)):
        expected = run_scan(narrow, profiles=profiles).labels
        assert expected and run_scan(wide, profiles=profiles).labels == expected, profiles
