"""Rules against the real sysfs fixtures, through `nfd-gpu rules test --root`
(the same scan the agent runs), not hand-made feature files."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from nfd_gpu.cli import app
from tests.rules.conftest import AMD_RULE, FIXTURES, INTEL_RULES, REPO

runner = CliRunner()
G = "gpu.feature.node.kubernetes.io/"


def _rules_test_root(rules: str, fixture: str) -> dict[str, Any]:
    root = FIXTURES / fixture
    assert root.is_dir(), root
    res = runner.invoke(app, ["rules", "test", rules, "--root", str(root)])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_intel_upstream_rules_on_flex170_sriov_root() -> None:
    rules = INTEL_RULES
    out = _rules_test_root(str(rules), "flex170-sriov")
    # One Flex 170 PF (8086:56c0, class 0380, i915 loaded) with 8 VFs enabled; the
    # ASPEED BMC VGA (1a03, class 0300) must not count. NFD's pci.device lists every
    # PCI function, VFs included (they keep the PF's device ID), so Intel's count
    # templates say 9 here, exactly as nfd-master would on this host.
    assert out["labels"] == {
        "intel.feature.node.kubernetes.io/gpu": "true",
        "gpu.intel.com/device-id.0380-56c0.present": "true",
        "gpu.intel.com/device-id.0380-56c0.count": "9",
        "gpu.intel.com/device.count": "9",
        "gpu.intel.com/family": "Flex_Series",
        "gpu.intel.com/product": "Flex_170",
    }
    assert out["errors"] == []
    assert out["extendedResources"] == {}
    assert out["taints"] == []


@pytest.mark.parametrize("fixture", ["hgx-h100", "mi210-8x", "workstation-rtx4090", "vm-no-gpu"])
def test_intel_upstream_rules_ignore_other_vendors(fixture: str) -> None:
    rules = INTEL_RULES
    out = _rules_test_root(str(rules), fixture)
    # the RTX 4090 workstation has an Intel iGPU (8086:a780, class 0300, i915)
    expected = (
        {
            "intel.feature.node.kubernetes.io/gpu": "true",
            "gpu.intel.com/device-id.0300-a780.present": "true",
            "gpu.intel.com/device-id.0300-a780.count": "1",
        }
        if fixture == "workstation-rtx4090"
        else {}
    )
    assert out["labels"] == expected
    assert out["errors"] == []


def test_amd_upstream_rule_on_mi210_root() -> None:
    out = _rules_test_root(str(AMD_RULE), "mi210-8x")
    # 8x MI210 (1002:740f): the generic AMD GPU label and the MI210 one, no VF label
    assert out["labels"] == {
        "feature.node.kubernetes.io/amd-gpu": "true",
        "feature.node.kubernetes.io/amd-gpu-mi210": "true",
    }
    assert out["errors"] == []


@pytest.mark.parametrize("fixture", ["hgx-h100", "flex170-sriov", "passthrough-host", "vm-no-gpu"])
def test_amd_upstream_rule_ignores_other_vendors(fixture: str) -> None:
    out = _rules_test_root(str(AMD_RULE), fixture)
    assert out["labels"] == {}
    assert out["errors"] == []


# Shipped rules/: every fixture, exact labels (all four files evaluated together).
SHIPPED_EXPECTED: dict[str, dict[str, str]] = {
    # 8x H100 SXM5 80GB (hopper, 81559 MiB, MIG-capable, nvidia driver)
    "hgx-h100": {G + "class": "large", G + "mig-ready": "true"},
    # 8x MI210 (cdna2, 65536 MiB): large tier; not CDNA3
    "mi210-8x": {G + "class": "large"},
    # Flex 170 PF + 8 VFs (16 GiB): small tier, Intel Data Center Flex, 9 functions
    "flex170-sriov": {
        G + "class": "small",
        G + "intel.datacenter": "true",
        G + "intel.datacenter.series": "flex",
        G + "intel.datacenter.count": "9",
    },
    # mixed Intel iGPU + RTX 4090: no node memory figure without NVML, so no tier
    "workstation-rtx4090": {},
    # 4x A100 80GB on vfio-pci: ampere, 81920 MiB, MIG-capable
    "passthrough-host": {G + "class": "large", G + "mig-ready": "true"},
    "vm-no-gpu": {},
    # A100 40GB + T4: smallest memory 15360 MiB (T4) -> small; the A100 is MIG-capable
    "a100-t4": {G + "class": "small", G + "mig-ready": "true"},
    # 8x A100 SXM4 40GB (40960 MiB) with MIG enabled: medium, MIG ready and active
    "dgx-a100-mig-mixed": {
        G + "class": "medium",
        G + "mig-ready": "true",
        G + "mig-active": "true",
    },
    # H100 80GB with MIG enabled (single strategy)
    "h100-mig-single": {G + "class": "large", G + "mig-ready": "true", G + "mig-active": "true"},
    # H100 without a loaded driver: facts from the tables, MIG capable but not enabled
    "h100-no-driver": {G + "class": "large", G + "mig-ready": "true"},
    # H100 node where one GPU is lost: the others and the tables still give the facts
    "h100-gpu-lost": {G + "class": "large", G + "mig-ready": "true"},
    # the health fixtures: 2x H100 80GB / mi210-8x, one fault each; the faults
    # change no rule label (rules/gpu-health.yaml only taints: tests/health)
    **{
        f"h100-{fault}": {G + "class": "large", G + "mig-ready": "true"}
        for fault in (
            "ecc-uncorrectable",
            "remap-pending",
            "remap-pending-all",
            "remap-failure",
            "thermal-slowdown",
            "nvlink-down",
            "xid-79",
            "xid-48",
            "aer-fatal",
        )
    },
    "mi210-ras-ue": {G + "class": "large"},
    # damaged tree: mixed vendors, smallest readable memory 16 GiB
    "broken": {G + "class": "small"},
    # 8x MI300X (cdna3, 192 GiB) in CPX/NPS4: still 8 PCI GPUs for the CDNA3 rule
    "mi300x-cpx-nps4": {
        G + "class": "large",
        G + "amd.instinct-cdna3": "true",
        G + "amd.instinct-cdna3.count": "8",
    },
    # 2x H100 + 2x MI210: family is `mixed`, so not the large tier; 64 GiB minimum -> medium
    "mixed-nvidia-amd": {G + "class": "medium"},
    # real listings (tests/fixtures/specs/real_listings.py): RTX 5090 + 4090, smallest 24564 MiB
    "real-rtx5090-rtx4090": {G + "class": "small"},
    # GB10, V100 and the laptop: no memory figure in the listing (nor a one-size table row)
    "real-gb10-spark": {},
    "real-v100-aws": {},
    "real-laptop-cml-1660ti": {},
    # MI350X: cdna4 with the table's 288 GiB; not the CDNA3 rule
    "real-mi350x": {G + "class": "large"},
    # RX 7900 XTX: 24560 MiB (LACT), just under the medium tier's 24 GiB
    "real-rx7900xtx": {G + "class": "small"},
    # Arc B580: the table's 12 GiB
    "real-b580-xe": {G + "class": "small"},
    # real failures (tests/fixtures/specs/real_health.py): the model table's memory (RTX 3090
    # 24 GiB and RTX 5090 32 GiB: medium; RTX 5080 16 GiB: small); health taints are not labels
    "real-rtx3090-rminit": {G + "class": "medium"},
    "real-rtx5090-rminit": {G + "class": "medium"},
    "real-titanv-rminit": {G + "class": "small"},  # Titan V: 12 GiB
    "real-rtx5080-xid79": {G + "class": "small"},
    # Tesla K40m: 11441 MB (gpu_burn's figure, NVML's total)
    "real-k40m-aer-xid79": {G + "class": "small"},
    # A100 80GB PCIe: the table's 80 GiB; MIG capable (its recording: MIG mode disabled)
    "real-a100-xid94": {G + "class": "large", G + "mig-ready": "true"},
    # 8x MI300X PF on gim (cdna3, 196608 MiB from the table) -> large. The CDNA3 rule
    # matches pci.device, which lists every function: 8 PFs (74a1) + 8 VFs (74b5) = 16.
    "mi300x-sriov-host": {
        G + "class": "large",
        G + "amd.instinct-cdna3": "true",
        G + "amd.instinct-cdna3.count": "16",
    },
    # VM with one MI300X VF (74b5 is in the CDNA3 list); its memory is unknown, so
    # memory-mib is absent and no class tier matches.
    "mi300x-vf-guest": {
        G + "amd.instinct-cdna3": "true",
        G + "amd.instinct-cdna3.count": "1",
    },
    # 4x Max 1550 on xe (xe-hpc, 131072 MiB from tile VRAM) -> large; 0bd5 class 0380 with
    # xe loaded -> Intel Data Center, series max (device does not start with 56c), 4 functions.
    "max1550-xe": {
        G + "class": "large",
        G + "intel.datacenter": "true",
        G + "intel.datacenter.series": "max",
        G + "intel.datacenter.count": "4",
    },
    # Arc A770 (16384 MiB from lmem_total_bytes) < 24576 -> small; class 0300: not Data Center
    "arc-a770": {G + "class": "small"},
    # Arc B580 on built-in xe (12288 MiB from tile VRAM) -> small; class 0300
    "talos-arc-xe": {G + "class": "small"},
    # 2x Tesla T4 (turing, 15360 MiB) -> small; not MIG-capable
    "nvidia-vgpu-host": {G + "class": "small"},
    # vGPU guest: GRID T4-4Q (turing, NVML memory 4096 MiB, the vGPU's framebuffer) -> small
    # (gpu-class.yaml); MIG not supported -> no mig-ready; not AMD or Intel
    "nvidia-vgpu-guest": {G + "class": "small"},
    # the real H200 VM (hopper, 143771 MiB from NVML, MIG capable and disabled)
    "h200-vm": {G + "class": "large", G + "mig-ready": "true"},
    # 2x H200 (hopper, 143771 MiB from NVML) with MIG enabled: large, MIG ready and active
    "h200-mig-mixed": {G + "class": "large", G + "mig-ready": "true", G + "mig-active": "true"},
    # 1x Tesla P100 16GB in a Hyper-V VM (pascal, 16384 MiB from NVML): below 24 GiB, small;
    # not MIG-capable
    "hyperv-p100-vm": {G + "class": "small"},
    # 3x GB200 on nvgrace_gpu_vfio_pci (blackwell, MIG-capable): no memory in the listing
    # or a one-size table row, so no tier
    "real-gb200-vfio": {G + "mig-ready": "true"},
    # Jetsons (unified memory: CUDA's total, MiB): Nano 3963 -> small; Xavier 31003 and
    # Orin 54792 -> medium; the JetPack 7 listings show no memory figure, so no tier
    "real-jetson-nano": {G + "class": "small"},
    "real-jetson-xavier": {G + "class": "medium"},
    "real-jetson-orin-jp6": {G + "class": "medium"},
    "real-jetson-orin-jp7": {},
    "real-jetson-thor": {},
}


@pytest.mark.parametrize("fixture", sorted(SHIPPED_EXPECTED))
def test_shipped_rules_on_fixture_root(fixture: str) -> None:
    out = _rules_test_root(str(REPO / "rules"), fixture)
    assert out["labels"] == SHIPPED_EXPECTED[fixture]
    assert out["errors"] == []


def test_every_fixture_is_covered() -> None:
    assert {p.name for p in FIXTURES.iterdir() if p.is_dir()} == set(SHIPPED_EXPECTED)


@pytest.mark.parametrize(
    ("rule_file", "fixture", "expected"),
    [
        ("gpu-class.yaml", "hgx-h100", {G + "class": "large"}),
        ("gpu-class.yaml", "mi210-8x", {G + "class": "large"}),
        ("gpu-class.yaml", "flex170-sriov", {G + "class": "small"}),
        ("mig-ready.yaml", "hgx-h100", {G + "mig-ready": "true"}),
        ("mig-ready.yaml", "mi210-8x", {}),
        ("amd-instinct-cdna3.yaml", "mi210-8x", {}),
        ("amd-instinct-cdna3.yaml", "hgx-h100", {}),
        (
            "intel-datacenter.yaml",
            "flex170-sriov",
            {
                G + "intel.datacenter": "true",
                G + "intel.datacenter.series": "flex",
                G + "intel.datacenter.count": "9",
            },
        ),
        ("intel-datacenter.yaml", "workstation-rtx4090", {}),
    ],
)
def test_each_shipped_rule_on_its_target(
    rule_file: str, fixture: str, expected: dict[str, str]
) -> None:
    out = _rules_test_root(str(REPO / "rules" / rule_file), fixture)
    assert out["labels"] == expected
    assert out["errors"] == []


def test_scan_applies_shipped_rules_on_hgx_h100() -> None:
    from nfd_gpu.scan import run_scan

    plain = run_scan(FIXTURES / "hgx-h100")
    with_rules = run_scan(FIXTURES / "hgx-h100", rules_path=REPO / "rules")
    assert with_rules.labels == {
        **plain.labels,
        G + "class": "large",
        G + "mig-ready": "true",
    }
    assert with_rules.warnings == plain.warnings
