"""deploy/components: every subset combines with the base, renders the same with our
renderer and the real kustomize, and every object validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy import renderings as r
from tests.deploy.test_manifests import OVERLAYS, validate


def test_components_present() -> None:
    assert r.COMPONENTS == [
        "compat",
        "gpu-nodes-only",
        "host-runtime-config",
        "monitoring",
        "nvml",
        "worker-sidecar",
    ]
    assert len(r.SUBSETS) == 64


@pytest.mark.parametrize("subset", r.SUBSETS, ids=lambda s: "+".join(s) or "base")
def test_subset_renders_and_validates(subset: tuple[str, ...], tmp_path: Path) -> None:
    objs = r.render_subset(subset, tmp_path / "k")
    kinds = [o["kind"] for o in objs]
    assert kinds.count("Namespace") == 1 and kinds.count("DaemonSet") == 1
    assert ("PodMonitor" in kinds) == ("monitoring" in subset)
    (role,) = [o for o in objs if o["kind"] == "Role"]  # always: one name set for every build
    assert (role["rules"] == []) == ("worker-sidecar" in subset)
    for o in objs:
        if o["kind"] != "Namespace":
            assert o["metadata"].get("namespace") == "nfd-gpu", o["kind"]
        validate(o, objs)
    spec = next(o for o in objs if o["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    assert ("affinity" in spec) == ("gpu-nodes-only" in subset)
    assert (spec.get("runtimeClassName") == "nvidia") == ("nvml" in subset)
    # the container-runtime directories are mounted only with host-runtime-config, and then
    # as type Directory: the agent never creates them on the host
    host = {
        v["hostPath"]["path"]: v["hostPath"]["type"] for v in spec["volumes"] if "hostPath" in v
    }
    runtime = {"/etc/cdi", "/var/run/cdi", "/etc/OpenCL/vendors", "/etc/nvidia-container-runtime"}
    if "host-runtime-config" in subset:
        assert {host[p] for p in runtime} == {"Directory"}
    else:
        assert not runtime & set(host)


@pytest.mark.parametrize("subset", r.SUBSETS, ids=lambda s: "+".join(s) or "base")
def test_subset_matches_real_kustomize(subset: tuple[str, ...], tmp_path: Path) -> None:
    d = r.subset_dir(subset, tmp_path / "k")
    assert r.normalized(r.kustomize_real(d)) == r.normalized(r.render_subset(subset, d))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_matches_real_kustomize(overlay: str) -> None:
    d = r.DEPLOY / "overlays" / overlay
    from tests.deploy.kustomize import build

    assert r.normalized(r.kustomize_real(d)) == r.normalized(build(d))


def test_gpu_nodes_only_labels_are_nfds() -> None:
    """The affinity keys are nfd-worker's default PCI labels (docs/install.md, component
    `gpu-nodes-only`; NFD's pci source defaults: deviceClassWhitelist 03, 0b40, 12; fields
    class, vendor; `pci-<class>_<vendor>.present`)
    for NVIDIA, AMD and Intel, and the chart's default list is the same."""
    import yaml

    from tests.deploy.kustomize import load_docs

    (patch,) = load_docs(r.DEPLOY / "components" / "gpu-nodes-only" / "daemonset-affinity.yaml")
    terms = patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    keys = []
    for t in terms:
        (e,) = t["matchExpressions"]
        assert e["operator"] == "In" and e["values"] == ["true"]
        keys.append(e["key"])
    pairs = [
        k.removeprefix("feature.node.kubernetes.io/pci-").removesuffix(".present") for k in keys
    ]
    for p in pairs:
        cls, vendor = p.split("_")
        assert cls[:2] in ("03", "12") and vendor in ("10de", "1002", "8086"), p
    assert {f"{c}_{v}" for c in ("0300", "0302") for v in ("10de", "1002", "8086")} <= set(pairs)
    values = yaml.safe_load((r.CHART / "values.yaml").read_text())
    assert values["gpuNodeLabels"] == pairs
