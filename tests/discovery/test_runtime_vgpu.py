"""SR-IOV / vGPU modes, mdev types and runtime facts (device nodes, toolkit, CDI,
ROCm, OpenCL, Level Zero)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nfd_gpu.discovery import runtime, vgpu
from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.labels.neutral import documented
from nfd_gpu.labels.registry import PROFILES
from nfd_gpu.labels.validate import check_label
from nfd_gpu.model import Snapshot
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

G = "gpu.feature.node.kubernetes.io"


def _copy(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(fixture_root(name), root, symlinks=True)
    return root


# --- SR-IOV -------------------------------------------------------------------------


def test_mi300x_sriov_host_pf_on_gim() -> None:
    r = run_scan(
        fixture_root("mi300x-sriov-host"),
        profiles=("neutral", "amd"),
        profile_options=("amd-mode",),  # the GPU operator's KubeVirt labeller's gpu.mode
    )
    labels = r.labels
    assert labels[f"{G}/count"] == "8"  # PFs; the 8 VFs (74b5 on vfio-pci) are not GPUs
    assert labels[f"{G}/mode"] == "vf-passthrough"
    assert labels[f"{G}/driver"] == "gim"
    assert labels[f"{G}/sriov.capable"] == "true"
    assert labels[f"{G}/sriov.vfs"] == "8"
    assert labels[f"{G}/devices.ready"] == "true"  # dev/vfio/<group> of every VF
    # the AMD labeller's VF mode: the VFs' device id, no container labels
    assert labels["amd.com/gpu.device-id"] == "74b5"
    assert labels["amd.com/gpu.mode"] == "vf-passthrough"
    assert "amd.com/gpu.vram" not in labels
    assert {g.vf_drivers for g in r.snapshot.gpus} == {("vfio-pci",)}
    inst = snapshot_features(r.snapshot)["instances"]["gpu.device"]["elements"]
    assert {e["attributes"]["mode"] for e in inst} == {"vf-passthrough"}
    assert {e["attributes"]["virtual"] for e in inst} == {"false"}


def test_sriov_host_missing_vfio_node_is_not_ready(tmp_path: Path) -> None:
    root = _copy("mi300x-sriov-host", tmp_path)
    (root / "dev/vfio/123").unlink()
    assert run_scan(root).labels[f"{G}/devices.ready"] == "false"


def test_mi300x_vf_guest_counts_the_vf() -> None:
    r = run_scan(fixture_root("mi300x-vf-guest"), profiles=("neutral", "amd"))
    labels = r.labels
    assert labels[f"{G}/count"] == "1"
    assert labels[f"{G}/mode"] == "container"
    assert labels[f"{G}/sriov.capable"] == "false"
    assert labels[f"{G}/amd.gfx"] == "gfx942"
    assert "memory-mib" not in {k.split("/", 1)[1] for k in labels}  # VF memory unknown
    assert labels["amd.com/gpu.device-id"] == "74b5"
    assert labels["amd.com/gpu.simd-count"] == "1216"
    assert labels["amd.com/gpu.cu-count"] == "304"
    (gpu,) = r.snapshot.gpus
    assert gpu.guest_vf
    inst = snapshot_features(r.snapshot)["instances"]["gpu.device"]["elements"]
    assert inst[0]["attributes"]["virtual"] == "true"
    assert inst[0]["attributes"]["device_id"] == "74b5"
    assert r.warnings == []


# --- vGPU (mdev) --------------------------------------------------------------------


def test_nvidia_vgpu_host_mdev_types() -> None:
    r = run_scan(fixture_root("nvidia-vgpu-host"))
    assert r.labels[f"{G}/mode"] == "vgpu-host"
    assert r.labels[f"{G}/count"] == "2"
    types = r.snapshot.vgpu_types
    assert len(types) == 4
    assert {(t.type, t.name, t.available_instances) for t in types} == {
        ("nvidia-222", "GRID T4-1B", 16),
        ("nvidia-223", "GRID T4-2B", 8),
    }
    assert {t.device_api for t in types} == {"vfio-pci"}
    elems = r.features["instances"]["gpu.vgpu_type"]["elements"]
    assert {
        "parent": "0000:3b:00.0",
        "type": "nvidia-222",
        "name": "GRID T4-1B",
        "available_instances": "16",
        "device_api": "vfio-pci",
    } in [e["attributes"] for e in elems]
    # vGPU hosts hand devices to VMs later: nothing to check, no devices.ready
    assert f"{G}/devices.ready" not in r.labels


def test_mdev_on_passthrough_gpu_keeps_passthrough(tmp_path: Path) -> None:
    root = _copy("passthrough-host", tmp_path)
    d = root / "sys/devices/pci0000:41/0000:41:00.0/mdev_supported_types/nvidia-1"
    d.mkdir(parents=True)
    (d / "available_instances").write_text("x\n")
    r = run_scan(root)
    assert r.labels[f"{G}/mode"] == "pf-passthrough"
    (t,) = r.snapshot.vgpu_types
    assert t.available_instances is None  # unparsable -> unknown
    assert t.name is None


@given(st.text())
def test_parse_count_total(text: str) -> None:
    v = vgpu.parse_count(text)
    assert v is None or (v >= 0 and text.strip().isascii() and v == int(text.strip()))


# --- runtime --------------------------------------------------------------------------


def test_cdi_kind_yaml_and_json() -> None:
    assert runtime.parse_cdi_kind('cdiVersion: "0.6.0"\nkind: nvidia.com/gpu\n') == "nvidia.com/gpu"
    assert runtime.parse_cdi_kind("kind: 'amd.com/gpu'  # comment\n") == "amd.com/gpu"
    assert runtime.parse_cdi_kind('{"cdiVersion": "0.5.0", "kind": "intel.com/gpu"}') == (
        "intel.com/gpu"
    )
    assert runtime.parse_cdi_kind("devices:\n  - kind: nested.com/x\n") is None
    assert runtime.parse_cdi_kind("kind: not a kind\n") is None
    assert runtime.parse_cdi_kind("{broken") is None
    assert runtime.parse_cdi_kind('["kind"]') is None
    assert runtime.parse_cdi_kind(None) is None


@given(st.text())
def test_parse_cdi_kind_total(text: str) -> None:
    kind = runtime.parse_cdi_kind(text)
    assert kind is None or ("/" in kind and " " not in kind)


def test_rocm_version() -> None:
    assert runtime.parse_rocm_version("6.2.0-66\n") == "6.2.0"
    assert runtime.parse_rocm_version("6.1") == "6.1"
    assert runtime.parse_rocm_version("six") is None
    assert runtime.parse_rocm_version("") is None


@given(st.text())
def test_parse_rocm_version_total(text: str) -> None:
    v = runtime.parse_rocm_version(text)
    assert v is None or all(p.isascii() and p.isdigit() for p in v.split("."))


def test_runtime_labels_on_guest() -> None:
    r = run_scan(fixture_root("mi300x-vf-guest"))
    labels = r.labels
    assert labels[f"{G}/devices.ready"] == "true"
    assert labels[f"{G}/runtime.rocm.version"] == "6.2.0"
    assert labels[f"{G}/runtime.rocm.major"] == "6"
    assert labels[f"{G}/runtime.opencl.amdocl64"] == "true"
    flags = r.features["flags"]["gpu.runtime"]["elements"]
    assert {"rocm", "opencl.amdocl64", "dev.kfd", "dev.dri.render", "devices-ready"} <= set(flags)
    rt = r.snapshot.runtime
    assert rt is not None
    assert {n.path for n in rt.device_nodes} >= {"dev/kfd", "dev/dri/renderD128"}
    assert all(len(n.mode) == 4 for n in rt.device_nodes)


def test_missing_kfd_is_not_ready(tmp_path: Path) -> None:
    root = _copy("mi300x-vf-guest", tmp_path)
    (root / "dev/kfd").unlink()
    assert run_scan(root).labels[f"{G}/devices.ready"] == "false"


def test_nvidia_toolkit_and_cdi(tmp_path: Path) -> None:
    root = _copy("a100-t4", tmp_path)
    (root / "etc/nvidia-container-runtime").mkdir(parents=True)
    (root / "etc/nvidia-container-runtime/config.toml").write_text("[nvidia-container-cli]\n")
    (root / "var/run/cdi").mkdir(parents=True)
    (root / "var/run/cdi/nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    (root / "var/run/cdi/junk.json").write_text("{}")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-container-runtime").write_text("")
    r = run_scan(root)
    labels = r.labels
    assert labels[f"{G}/runtime.nvidia-container-toolkit"] == "true"
    assert labels[f"{G}/runtime.cdi"] == "true"
    assert labels[f"{G}/runtime.cdi.nvidia.com"] == "true"
    assert labels[f"{G}/devices.ready"] == "true"
    assert any("junk.json: no CDI kind" in w for w in r.warnings)
    flags = set(r.features["flags"]["gpu.runtime"]["elements"])
    assert {"nvidia-container-toolkit", "nvidia-container-runtime", "cdi.nvidia.com/gpu"} <= flags
    (root / "dev/nvidia1").unlink()  # two GPUs need two minor nodes
    assert run_scan(root).labels[f"{G}/devices.ready"] == "false"


def test_no_dev_dir_ready_from_sysfs_except_nvidia() -> None:
    # mi210-8x has no dev/: render nodes and /dev/kfd derived from sysfs
    assert run_scan(fixture_root("mi210-8x")).labels[f"{G}/devices.ready"] == "true"
    # hgx-h100 has no dev/: /dev/nvidia* cannot be derived, so no label rather than a guess
    assert f"{G}/devices.ready" not in run_scan(fixture_root("hgx-h100")).labels


def test_no_runtime_labels_without_gpus(tmp_path: Path) -> None:
    root = _copy("vm-no-gpu", tmp_path)
    (root / "etc/OpenCL/vendors").mkdir(parents=True)
    (root / "etc/OpenCL/vendors/intel.icd").write_text("x\n")
    assert not [k for k in run_scan(root).labels if k.startswith(f"{G}/")]


def test_runtime_keys_documented() -> None:
    for key in ("devices.ready", "runtime.cdi.nvidia.com", "runtime.opencl.intel"):
        assert documented(key)


def test_snapshot_with_runtime_round_trips() -> None:
    snap = run_scan(fixture_root("max1550-xe")).snapshot
    assert snap.runtime is not None and snap.runtime.level_zero
    assert Snapshot.from_json(snap.to_json()) == snap
    snap = run_scan(fixture_root("nvidia-vgpu-host")).snapshot
    assert Snapshot.from_json(snap.to_json()) == snap


# --- property: the new files with any content ------------------------------------------

NEW_FILES = {
    "max1550-xe": [
        "sys/devices/pci0000:29/0000:29:00.0/tile0/physical_vram_size_bytes",
        "etc/cdi/intel-gpu.yaml",
    ],
    "arc-a770": ["sys/devices/pci0000:03/0000:03:00.0/drm/card0/lmem_total_bytes"],
    "nvidia-vgpu-host": [
        "sys/devices/pci0000:3b/0000:3b:00.0/mdev_supported_types/nvidia-222/name",
        "sys/devices/pci0000:3b/0000:3b:00.0/mdev_supported_types/nvidia-222/available_instances",
    ],
    "mi300x-vf-guest": ["opt/rocm/.info/version", "etc/OpenCL/vendors/amdocl64.icd"],
}


@pytest.fixture(scope="module")
def new_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name in NEW_FILES:
        root = tmp_path_factory.mktemp(name) / "root"
        shutil.copytree(fixture_root(name), root, symlinks=True)
        out[name] = root
    return out


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fixture=st.sampled_from(sorted(NEW_FILES)),
    index=st.integers(min_value=0),
    data=st.binary(max_size=200),
)
def test_new_files_any_bytes(
    new_trees: dict[str, Path], fixture: str, index: int, data: bytes
) -> None:
    root = new_trees[fixture]
    files = NEW_FILES[fixture]
    path = root / files[index % len(files)]
    original = path.read_bytes()
    try:
        path.write_bytes(data)
        r = run_scan(root, profiles=tuple(PROFILES))
        for k, v in r.labels.items():
            check_label(k, v)
        for fs in r.features["instances"].values():
            for inst in fs["elements"]:
                assert all(isinstance(v, str) for v in inst["attributes"].values())
    finally:
        path.write_bytes(original)


def test_intel_gvtg_types_on_igpu(tmp_path: Path) -> None:
    """Intel GVT-g offers mdev types on the iGPU (``i915-GVTg_V5_<n>``)."""
    root = _copy("workstation-rtx4090", tmp_path)
    d = root / "sys/devices/pci0000:00/0000:00:02.0/mdev_supported_types/i915-GVTg_V5_4"
    d.mkdir(parents=True)
    (d / "available_instances").write_text("2\n")
    (d / "device_api").write_text("vfio-pci\n")
    (d / "description").write_text("low_gm_size: 128MB\nhigh_gm_size: 512MB\n")
    r = run_scan(root)
    (t,) = r.snapshot.vgpu_types
    assert (t.parent, t.type, t.available_instances) == ("0000:00:02.0", "i915-GVTg_V5_4", 2)
    assert t.description == "low_gm_size: 128MB high_gm_size: 512MB"
    modes = {g.vendor: g.mode for g in r.snapshot.gpus}
    assert modes == {"intel": "vgpu-host", "nvidia": "container"}
    assert r.labels[f"{G}/mode"] == "mixed"


@pytest.mark.parametrize(
    ("fixture", "kinds"),
    [
        ("mi300x-vf-guest", {"dev/kfd", "dev/dri/renderD128"}),
        ("max1550-xe", {"dev/dri/renderD128", "dev/dri/renderD131"}),
        ("mi300x-sriov-host", {"dev/vfio/120", "dev/vfio/127"}),
    ],
)
def test_device_nodes_derived_from_sysfs_without_dev(
    fixture: str, kinds: set[str], tmp_path: Path
) -> None:
    """Without dev/ (the pod), DRM/KFD/VFIO-group nodes come from sysfs (devtmpfs names)
    and give the same readiness as the host's /dev."""
    import shutil

    from nfd_gpu import scan
    from nfd_gpu.host import HostRoot

    root = tmp_path / "root"
    shutil.copytree(fixture_root(fixture), root, symlinks=True)
    with_dev = scan.discover(HostRoot(root)).runtime
    shutil.rmtree(root / "dev")
    derived = scan.discover(HostRoot(root)).runtime
    assert with_dev is not None and derived is not None
    assert with_dev.dev_visible and not derived.dev_visible
    got = {n.path for n in derived.device_nodes}
    assert kinds <= got
    assert all(n.mode is None and not n.char_device for n in derived.device_nodes)
    # every derived render/kfd/vfio-group node is one the host's /dev has
    host_nodes = {n.path for n in with_dev.device_nodes}
    assert {p for p in got if "renderD" in p or p == "dev/kfd" or p[9:].isdigit()} <= host_nodes
    assert derived.devices_ready == with_dev.devices_ready is True


def test_nvidia_nodes_are_not_guessed_without_dev(tmp_path: Path) -> None:
    import shutil

    from nfd_gpu import scan
    from nfd_gpu.host import HostRoot

    root = tmp_path / "root"
    shutil.copytree(fixture_root("h100-mig-single"), root, symlinks=True)
    assert scan.discover(HostRoot(root)).runtime.devices_ready is True  # type: ignore[union-attr]
    shutil.rmtree(root / "dev")
    rt = scan.discover(HostRoot(root)).runtime
    assert rt is not None and rt.devices_ready is None
    assert not any(n.path.startswith("dev/nvidia") for n in rt.device_nodes)


def test_vf_iommu_groups_are_read_once_without_dev(tmp_path: Path) -> None:
    """Without ``dev/`` the VFIO nodes are derived from the VFs' IOMMU groups, which the
    readiness check needs again: each group link is read once, the nodes are the same."""
    from collections import Counter

    from nfd_gpu.host import HostRoot
    from nfd_gpu.scan import discover
    from tests.conftest import fixture_root

    root = tmp_path / "root"
    shutil.copytree(fixture_root("mi300x-sriov-host"), root, symlinks=True)
    shutil.rmtree(root / "dev")
    seen: list[str] = []
    host = HostRoot(root)
    host.set_recorder(seen.append)
    snap = discover(host)
    groups = Counter(p for p in seen if p.endswith("/iommu_group"))
    assert groups and max(groups.values()) == 1, groups
    assert snap.runtime is not None
    vfio = [n.path for n in snap.runtime.device_nodes if n.path.startswith("dev/vfio/")]
    assert len(vfio) == 8 and snap.runtime.devices_ready is True
