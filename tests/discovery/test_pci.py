"""PCI attribute parsers and the uevent/attribute-file fallbacks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nfd_gpu.discovery import pci
from nfd_gpu.discovery.registry import VENDORS, by_pci_id
from nfd_gpu.host import HostRoot
from tests.conftest import fixture_root

GPU_VENDORS = by_pci_id(VENDORS)  # PCI vendor id -> vendor, as registry.sources builds it


@pytest.mark.parametrize(
    ("text", "gen"),
    [
        ("2.5 GT/s", 1),
        ("5 GT/s", 2),
        ("8 GT/s", 3),
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s PCIe", 2),
        ("8.0 GT/s PCIe", 3),
        ("16.0 GT/s PCIe", 4),
        ("16 GT/s", 4),
        ("32.0 GT/s PCIe", 5),
        ("64.0 GT/s PCIe", 6),
        ("Unknown", None),
        ("Unknown speed", None),
        ("", None),
        (None, None),
        ("7 GT/s", None),
    ],
)
def test_link_speed_both_kernel_formats(text: str | None, gen: int | None) -> None:
    assert pci.parse_link_speed(text) == gen


@pytest.mark.parametrize(
    ("text", "width"), [("16", 16), ("1", 1), ("0", None), ("255", None), ("x", None), ("", None)]
)
def test_link_width(text: str, width: int | None) -> None:
    assert pci.parse_link_width(text) == width


@pytest.mark.parametrize(
    ("text", "digits", "out"),
    [
        ("0x10de", 4, "10de"),
        ("0x10DE\n", 4, "10de"),
        ("10de", 4, "10de"),
        ("0x030200", 6, "030200"),
        ("0x30200", 6, "030200"),
        ("0x1", 2, "01"),
        ("0x12345", 4, None),
        ("zz", 4, None),
        ("", 4, None),
    ],
)
def test_hex_ids(text: str, digits: int, out: str | None) -> None:
    assert pci.parse_hex_id(text, digits) == out


def test_fixture_device_fields() -> None:
    devs = {d.address: d for d in pci.discover(HostRoot(fixture_root("hgx-h100")), GPU_VENDORS)}
    gpu = devs["0000:18:00.0"]
    assert (gpu.vendor, gpu.device, gpu.class_id) == ("10de", "2330", "030200")
    assert (gpu.subsystem_vendor, gpu.subsystem_device, gpu.revision) == ("10de", "16c1", "a1")
    assert gpu.driver == "nvidia" and gpu.numa_node == 0 and gpu.iommu_group == "20"
    assert gpu.link is not None and (gpu.link.current_gen, gpu.link.current_width) == (5, 16)
    nic = devs["0000:1b:00.0"]
    assert nic.sriov_totalvfs == 8 and nic.sriov_numvfs == 4
    assert nic.virtfns == ("0000:1b:00.2", "0000:1b:00.3", "0000:1b:00.4", "0000:1b:00.5")
    assert devs["0000:1b:00.3"].physfn == "0000:1b:00.0"
    bmc = devs["0000:02:00.0"]
    assert bmc.vendor == "1a03" and bmc.driver == "ast"


def test_drm_nodes_and_old_link_format() -> None:
    devs = {
        d.address: d
        for d in pci.discover(HostRoot(fixture_root("workstation-rtx4090")), GPU_VENDORS)
    }
    assert devs["0000:01:00.0"].drm == ("card1", "renderD129")
    link = devs["0000:01:00.0"].link
    assert link is not None and link.current_gen == 4  # "16 GT/s"


def test_attribute_files_used_without_uevent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    uevent = root / "sys/devices/pci0000:18/0000:18:00.0/uevent"
    uevent.unlink()
    host = HostRoot(root)
    dev = pci.read_device(host, "0000:18:00.0", GPU_VENDORS)
    assert dev is not None
    assert (dev.vendor, dev.device, dev.class_id, dev.driver) == (
        "10de",
        "2330",
        "030200",
        "nvidia",
    )
    assert host.warnings == []


def test_degraded_link() -> None:
    from nfd_gpu.model import PcieLink

    assert PcieLink(3, 8, 4, 16).degraded  # lanes lost
    assert PcieLink(4, 8, 4, 16).degraded
    assert not PcieLink(4, 16, 4, 16).degraded
    assert not PcieLink(1, 16, 4, 16).degraded  # an idle link's speed is no loss
    assert not PcieLink(4, 8, 4, 16, 4, 8).degraded  # the port has 8 lanes
    assert not PcieLink(None, None, 4, 16).degraded
    assert (PcieLink(1, 8, 5, 16, 4, 8).gen, PcieLink(1, 8, 5, 16, 4, 8).width) == (4, 8)


def _retarget(root: Path, address: str, device: str) -> None:
    """Change a fixture GPU's device id (uevent and attribute file)."""
    d = root / f"sys/devices/pci0000:{address[5:7]}/{address}"
    (d / "device").write_text(f"0x{device}\n")
    ue = (d / "uevent").read_text().replace("PCI_ID=10DE:2330", f"PCI_ID=10DE:{device.upper()}")
    (d / "uevent").write_text(ue)


def test_product_from_pci_ids_when_no_driver_list_names_the_device(tmp_path: Path) -> None:
    from nfd_gpu.scan import run_scan

    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    # GK110 [GeForce GTX 780]: Kepler, in pci.ids, named by no driver list (current drivers
    # dropped it): the name from pci.ids, the family from its chip code GK110
    _retarget(root, "0000:18:00.0", "1004")
    gpu = {g.address: g for g in run_scan(root).snapshot.gpus}["0000:18:00.0"]
    assert gpu.product == "NVIDIA GeForce GTX 780"
    assert gpu.provenance["product"] == "pci.ids"
    assert (gpu.family, gpu.provenance["family"]) == ("kepler", "table")


def test_product_without_any_name_source(tmp_path: Path) -> None:
    from nfd_gpu.scan import run_scan

    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    (root / "usr/share/misc/pci.ids").unlink()
    _retarget(root, "0000:18:00.0", "0040")  # NV40 (GeForce 6800 Ultra): not in the table
    r = run_scan(root)
    gpu = {g.address: g for g in r.snapshot.gpus}["0000:18:00.0"]
    assert gpu.product == "NVIDIA Device 0040"
    assert r.labels["gpu.feature.node.kubernetes.io/product"] == "mixed"
    # A GPU of unknown family makes the summary unknown rather than wrong.
    assert "gpu.feature.node.kubernetes.io/family" not in r.labels


@pytest.mark.parametrize("name", ["mi300x-sriov-host", "flex170-sriov"])
def test_vfs_of_a_seen_pf_skip_the_sriov_reads(name: str) -> None:
    """A VF has no SR-IOV capability: discover() does not read its sriov_* files, and
    the result equals reading every function on its own (which does)."""
    host = HostRoot(fixture_root(name))
    seen: list[str] = []
    host.set_recorder(seen.append)
    devices = pci.discover(host, GPU_VENDORS)
    vfs = [d for d in devices if d.physfn]
    assert vfs, "fixture has no host-side VFs"
    for d in vfs:
        assert f"{pci.PCI_DEVICES}/{d.address}/sriov_totalvfs" not in seen
    assert any(p.endswith("/sriov_totalvfs") for p in seen)  # PFs still read theirs
    plain = HostRoot(fixture_root(name))
    for d in vfs:
        alone = pci.read_device(plain, d.address, GPU_VENDORS, full=False)
        assert alone is not None
        assert (alone.sriov_totalvfs, alone.sriov_numvfs, alone.virtfns) == (
            d.sriov_totalvfs,
            d.sriov_numvfs,
            d.virtfns,
        )
    assert not host.warnings


def _pci_elements(root: Path) -> dict[str, dict[str, str]]:
    from nfd_gpu.scan import run_scan

    feats = run_scan(root).features
    devs = {d.address: d for d in run_scan(root).snapshot.pci}
    out = {}
    for inst, addr in zip(feats["instances"]["pci.device"]["elements"], devs, strict=True):
        out[addr] = inst["attributes"]
    return out


def test_nfd_pci_device_attributes_as_nfd_reads_them(tmp_path: Path) -> None:
    """NFD source/pci: mandatory class/vendor/device/subsystem_*, optional sriov_totalvfs,
    iommu_group/type and iommu/intel-iommu/version; values trimmed, 0x dropped, class cut
    to 4 characters, malformed values kept as read."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(fixture_root("broken"), root, symlinks=True)
    dev = root / "sys/devices/pci0000:00/0000:00:00.0"
    (dev / "iommu").mkdir()
    (dev / "iommu/intel-iommu").mkdir()
    (dev / "iommu/intel-iommu/version").write_text("1:0\n")
    group = root / "sys/kernel/iommu_groups/5"
    group.mkdir(parents=True)
    (group / "type").write_text("identity\n")
    (dev / "iommu_group").symlink_to("../../../kernel/iommu_groups/5")
    flex = root / "sys/bus/pci/devices/0000:04:00.0"
    flex.joinpath("uevent").write_text("DRIVER=i915\n")
    flex.joinpath("class").write_text("0x03zz00\n")  # malformed: NFD keeps "03zz"
    els = _pci_elements(root)
    assert els["0000:00:00.0"]["iommu/intel-iommu/version"] == "1:0"
    assert els["0000:00:00.0"]["iommu_group/type"] == "identity"
    assert els["0000:04:00.0"]["class"] == "03zz"
    assert els["0000:04:00.0"]["sriov_totalvfs"] == "-5"  # negative kept as read
    assert els["0000:04:00.0"]["vendor"] == "8086"
    # a function with a malformed class is no GPU
    from nfd_gpu.scan import run_scan

    assert "0000:04:00.0" not in {g.address for g in run_scan(root).snapshot.gpus}


def test_nfd_iommu_attributes_read_only_when_something_sees_pci_device(tmp_path: Path) -> None:
    """``nfd_attributes=False`` (the agent without rules, ``scan`` printing labels) skips the
    two IOMMU attributes only NFD's pci.device carries; rules read them again."""
    import shutil

    from nfd_gpu.scan import run_scan

    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    dev = root / "sys/devices/pci0000:00/0000:00:00.0"
    (dev / "iommu/intel-iommu").mkdir(parents=True)
    (dev / "iommu/intel-iommu/version").write_text("1:0\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: r}\n"
        "spec:\n  rules:\n    - name: iommu\n      labels: {example.com/iommu: v1}\n"
        "      matchFeatures:\n        - feature: pci.device\n"
        "          matchExpressions: {iommu/intel-iommu/version: {op: In, value: ['1:0']}}\n"
    )

    def versions(**kw: object) -> list[str]:
        r = run_scan(root, **kw)  # type: ignore[arg-type]
        els = r.features["instances"]["pci.device"]["elements"]
        return [e["attributes"].get("iommu/intel-iommu/version", "") for e in els]

    assert "1:0" in versions()
    assert "1:0" not in versions(nfd_attributes=False)
    assert "1:0" in versions(nfd_attributes=False, rules_path=rules)
    with_rules = run_scan(root, nfd_attributes=False, rules_path=rules)
    assert with_rules.labels["example.com/iommu"] == "v1"
    plain = run_scan(root, nfd_attributes=False)
    assert plain.labels == run_scan(root).labels  # no label depends on them


def _rules_file(path: Path, *rules: str) -> Path:
    head = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: r}\n"
    path.write_text(head + "spec:\n  rules:\n" + "".join(rules))
    return path


@pytest.mark.parametrize(
    ("rule", "read"),
    [
        # expressions on other attributes only: their results cannot depend on the IOMMU
        (
            "    - name: a\n      labels: {example.com/a: 'on'}\n      matchFeatures:\n"
            "        - feature: pci.device\n"
            "          matchExpressions: {vendor: {op: In, value: ['10de']}}\n",
            False,
        ),
        # a matchName looks at every name of each instance
        (
            "    - name: a\n      labels: {example.com/a: 'on'}\n      matchFeatures:\n"
            "        - feature: pci.device\n"
            "          matchName: {op: InRegexp, value: ['^iommu/']}\n",
            True,
        ),
        # a template sees each matched instance's whole attribute map
        (
            "    - name: a\n      labelsTemplate: '{{ range .pci.device }}{{ if index . "
            '"iommu/intel-iommu/version" }}example.com/iommu=v1{{ end }}{{ end }}\'\n'
            "      matchFeatures:\n        - feature: pci.device\n"
            "          matchExpressions: {class: {op: Exists}}\n",
            True,
        ),
        # DoesNotExist on one of them: named
        (
            "    - name: a\n      labels: {example.com/a: 'on'}\n      matchFeatures:\n"
            "        - feature: PCI.device\n"
            "          matchExpressions: {iommu_group/type: {op: DoesNotExist}}\n",
            True,
        ),
    ],
)
def test_nfd_iommu_attributes_read_only_for_rules_that_can_see_them(
    tmp_path: Path, rule: str, read: bool
) -> None:
    """With rules, the two IOMMU attributes are read only when a rule's result can depend on
    them (on an SR-IOV host they were two reads per function for every rule set); the
    labels are the same as with them read."""
    import shutil

    from nfd_gpu.scan import run_scan

    root = tmp_path / "root"
    shutil.copytree(fixture_root("hgx-h100"), root, symlinks=True)
    dev = root / "sys/devices/pci0000:00/0000:00:00.0"
    (dev / "iommu/intel-iommu").mkdir(parents=True)
    (dev / "iommu/intel-iommu/version").write_text("1:0\n")
    rules = _rules_file(tmp_path / "rules.yaml", rule)
    reads: list[str] = []
    from nfd_gpu.host import HostRoot

    real_read_bytes = HostRoot.read_bytes

    def counting(self: HostRoot, rel: str, *a: object, **kw: object) -> object:
        reads.append(rel)
        return real_read_bytes(self, rel, *a, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(HostRoot, "read_bytes", counting)
        got = run_scan(root, nfd_attributes=False, rules_path=rules)
    iommu_reads = [r for r in reads if r.endswith(("iommu_group/type", "intel-iommu/version"))]
    assert bool(iommu_reads) is read, iommu_reads[:3]
    assert got.labels == run_scan(root, rules_path=rules).labels


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        (None, "resource: missing"),
        (b"0x0 0x0\n", "resource: line 1 is not three hex values: '0x0 0x0'"),
        (b"\xff\xfe garbage\n", "resource: line 1 is not three hex values"),
    ],
)
def test_damaged_resource_of_a_vfio_function_is_said(
    tmp_path: Path, content: bytes | None, warning: str
) -> None:
    # its BARs are GFD's vfio gpu.memory: a window lost to a damaged line or file is a
    # warning naming the file (docs/migration.md), not a smaller memory label said nowhere
    root = tmp_path / "r"
    shutil.copytree(fixture_root("passthrough-host"), root, symlinks=True)
    res = root / "sys/devices/pci0000:41/0000:41:00.0/resource"
    if content is None:
        res.unlink()
    else:
        res.write_bytes(content + res.read_bytes())
    host = HostRoot(root)
    dev = pci.read_device(host, "0000:41:00.0", GPU_VENDORS)
    assert dev is not None and dev.bars == ()
    want = f"/sys/bus/pci/devices/0000:41:00.0/{warning}"
    assert [w for w in host.warnings if "resource" in w] == [
        w for w in host.warnings if w.startswith(want)
    ]
    assert any(w.startswith(want) for w in host.warnings), host.warnings
