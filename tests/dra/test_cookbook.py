"""The CEL cookbook (``nfd_gpu/dra/cookbook.py``, docs/dra.md) judged by Kubernetes' own DRA
CEL compiler (``k8s.io/dynamic-resource-allocation/cel``, the ``dra-cel`` judge built by
tests/e2e/build.sh) on the preview devices of every fixture: each recipe, with each
device's value, selects exactly the devices that carry what the label promises. Without the
judge: skipped locally, a failure in CI."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from typing import Any

import pytest

from nfd_gpu.dra.cookbook import NO_SELECTOR, RECIPES, checks
from nfd_gpu.dra.docs import render_docs
from nfd_gpu.dra.preview import Device, devices
from nfd_gpu.labels.neutral import LABEL_TABLE
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, nfd_gpu_cmd
from tests.e2e.cluster import BIN

FIXTURES = sorted(p.name for p in (REPO / "tests/fixtures/sysfs").iterdir() if p.is_dir())
JUDGE = BIN / "dra-cel"


def judge(cases: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    if not JUDGE.exists():
        msg = f"{JUDGE} missing (run: bash tests/e2e/build.sh dra-cel)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(msg)
        pytest.skip(msg)
    p = subprocess.run(
        [str(JUDGE)], input=json.dumps(cases), capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    out: list[list[dict[str, Any]]] = json.loads(p.stdout)
    return out


@functools.cache
def fixture_devices(name: str) -> tuple[Device, ...]:
    return tuple(devices(run_scan(REPO / "tests/fixtures/sysfs" / name).snapshot))


def test_docs_are_generated() -> None:
    assert (REPO / "docs/dra.md").read_text() == render_docs(), (
        "docs/dra.md is stale: run `python -m nfd_gpu.dra.docs > docs/dra.md`"
    )


def test_every_neutral_label_has_a_line() -> None:
    for doc in LABEL_TABLE:
        has_recipe = any(r.key == doc.key or doc.regex().match(r.key) for r in RECIPES)
        assert has_recipe or doc.key in NO_SELECTOR, doc.key


def test_every_recipe_selects_what_its_label_promises() -> None:
    found = [(name, c) for name in FIXTURES for c in checks(fixture_devices(name))]
    results = judge([case for _, (_, case, _) in found])
    exercised = {where.split(" for ")[0] for _, (where, _, _) in found}
    assert exercised == {f"{r.key} ({r.driver})" for r in RECIPES}  # every recipe ran
    for (name, (where, _, want)), (got,) in zip(found, results, strict=True):
        assert "error" not in got, f"{name}: {where}: {got['error']}"
        assert tuple(sorted(got["matches"])) == want, f"{name}: {where}"


def test_traps_as_the_compiler_answers() -> None:
    """What docs/dra.md says of spelling and of mixed nodes, on mixed-nvidia-amd."""
    devs = fixture_devices("mixed-nvidia-amd")
    labels = run_scan(REPO / "tests/fixtures/sysfs/mixed-nvidia-amd").labels
    assert labels["gpu.feature.node.kubernetes.io/family"] == "mixed"
    assert labels["gpu.feature.node.kubernetes.io/memory-mib"] == "65536"
    nv = [d.api() for d in devs if d.driver == "gpu.nvidia.com"]
    amd = [d.api() for d in devs if d.driver == "gpu.amd.com"]
    arch = "device.attributes['gpu.nvidia.com'].architecture"
    mem = "device.capacity[device.driver].memory.compareTo(quantity('65536Mi')) > 0"
    product = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-H100-80GB-HBM3'"
    nv_out, amd_out = judge(
        [
            {"driver": "gpu.nvidia.com", "devices": nv,
             "expressions": [f"{arch} == 'Hopper'", f"{arch} == 'hopper'", mem, product,
                             "device.attributes['gpu.nvidia.com'].driverVersion > '500'"]},
            {"driver": "gpu.amd.com", "devices": amd, "expressions": [mem]},
        ]
    )  # fmt: skip
    assert len(nv_out[0]["matches"]) == 2 and nv_out[1]["matches"] == []
    assert len(nv_out[2]["matches"]) == 2 and amd_out[0]["matches"] == []
    assert nv_out[3]["matches"] == []  # the sanitised label value is no NVML name
    assert "error" in nv_out[4]  # a version is not a string


def test_scan_dra_preview_through_the_judge() -> None:
    """``scan --format dra-preview`` of a root, fed to the judge as docs/dra.md shows."""
    p = subprocess.run(
        [*nfd_gpu_cmd(), "scan", "--root", str(REPO / "tests/fixtures/sysfs/dgx-a100-mig-mixed"),
         "--format", "dra-preview"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["apiVersion"] == "nfd-gpu/dra-preview-v1" and doc["preview"] is True
    assert "authoritative" in doc["note"]
    cel = "device.attributes['gpu.nvidia.com'].type == 'mig'"
    cases = [{**d, "expressions": [cel, "device.attributes['gpu.nvidia.com'].type == 'gpu'"]}
             for d in doc["drivers"]]  # fmt: skip
    ((mig, gpu),) = judge(cases)
    snap = run_scan(REPO / "tests/fixtures/sysfs/dgx-a100-mig-mixed").snapshot
    migs = [p for p in snap.partitions if p.kind == "mig"]
    assert len(mig["matches"]) == len(migs) > 0
    assert len(gpu["matches"]) == sum(1 for g in snap.gpus if not g.nvidia.mig_enabled)
