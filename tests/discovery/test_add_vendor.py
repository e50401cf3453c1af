"""Adding a vendor is one package and one line in ``registry.VENDORS``: the worked example of
docs/architecture.md ("acme", PCI vendor id 1e3e), run through the registry's own code.

The two definitions below are what ``nfd_gpu/discovery/acme/sysfs.py`` and
``nfd_gpu/discovery/acme/__init__.py`` would hold; ``registry.sources`` with ``VENDOR``
added is what ``SOURCES`` becomes with the line ``acme.VENDOR,`` in ``VENDORS``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import jsonschema

from nfd_gpu.cli.scan import scan_document
from nfd_gpu.discovery import registry, system
from nfd_gpu.discovery.source import Context, Source, Vendor
from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.host import HostRoot
from nfd_gpu.model import Gpu, Snapshot
from nfd_gpu.record import replace
from nfd_gpu.scan import ScanResult, discover, label
from tests.conftest import REPO


# discovery/acme/sysfs.py
def _with_cores(host: HostRoot, g: Gpu) -> Gpu:
    cores = host.read_int(f"sys/bus/pci/devices/{g.address}/acme/cores")
    if cores is None:
        return g
    provenance = {**g.provenance, "compute_units": "sysfs"}
    return replace(g, compute_units=cores, provenance=provenance)


def _discover(ctx: Context, snap: Snapshot) -> Snapshot:
    gpus = tuple(_with_cores(ctx.host, g) if g.vendor == "acme" else g for g in snap.gpus)
    return replace(snap, gpus=gpus)


SOURCE = Source("acme", _discover, needs=("acme",))

# discovery/acme/__init__.py
VENDOR = Vendor(
    name="acme",
    pci_id="1e3e",
    display="ACME",
    drivers=("acme",),
    modules=("acme",),
    sources=(SOURCE,),
    dev_list=("acme",),  # its device nodes: dev/acmectl, no DRM render node
    dev_needs=("acmectl",),
    render_node=False,
)


def _host(tmp_path: Path) -> HostRoot:
    """One ACME display controller bound to its driver, with 64 cores, module 1.2.3."""
    root = tmp_path / "root"
    dev = root / "sys/devices/pci0000:01/0000:01:00.0"
    (dev / "acme").mkdir(parents=True)
    (dev / "acme/cores").write_text("64\n")
    (dev / "uevent").write_text(
        "DRIVER=acme\nPCI_CLASS=30200\nPCI_ID=1E3E:2000\nPCI_SUBSYS_ID=1E3E:0001\n"
    )
    (dev / "revision").write_text("0x01\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/bus/pci/devices/0000:01:00.0").symlink_to(
        "../../../devices/pci0000:01/0000:01:00.0"
    )
    (root / "sys/module/acme").mkdir(parents=True)
    (root / "sys/module/acme/version").write_text("1.2.3\n")
    return HostRoot(root)


def test_a_new_vendor_is_one_package_and_one_registry_line(tmp_path: Path) -> None:
    snap = discover(_host(tmp_path), sources=registry.sources((*registry.VENDORS, VENDOR)))
    # no model table, no family to derive: the one warning names the ids and how to report
    (warning,) = snap.warnings
    assert warning.startswith("unknown GPU (1e3e:2000, subsystem 1e3e:0001, revision 01) at ")
    assert "nfd-gpu snapshot" in warning
    (g,) = snap.gpus
    assert (g.vendor, g.device_id, g.driver) == ("acme", "2000", "acme")
    assert g.product == "ACME Device 2000"  # Vendor.display; no model table, no pci.ids
    assert g.mode == "container"  # Vendor.drivers
    assert g.compute_units == 64 and g.provenance["compute_units"] == "sysfs"  # its own source
    assert snap.driver_versions == {"acme": "1.2.3"}  # Vendor.modules
    assert snap.vendor_driver_versions == {"acme": "1.2.3"}  # Vendor.drivers
    labels, _ = label(snap, profiles=("neutral",))
    assert labels["gpu.feature.node.kubernetes.io/count"] == "1"
    assert labels["gpu.feature.node.kubernetes.io/acme.driver.version"] == "1.2.3"
    assert labels["gpu.feature.node.kubernetes.io/acme.driver.major"] == "1"


def test_its_device_nodes_are_read_from_its_vendor(tmp_path: Path) -> None:
    """``runtime`` lists and requires the nodes ``Vendor.dev_*`` name, nothing else."""
    host = _host(tmp_path)
    dev = tmp_path / "root/dev"
    dev.mkdir()
    (dev / "acmectl").write_text("")
    (dev / "unrelated").write_text("")
    sources = registry.sources((*registry.VENDORS, VENDOR))
    snap = discover(host, sources=sources)
    assert snap.runtime is not None
    assert [n.path for n in snap.runtime.device_nodes] == ["dev/acmectl"]
    assert snap.runtime.devices_ready is True
    (dev / "acmectl").unlink()
    snap = discover(HostRoot(tmp_path / "root"), sources=sources)
    assert snap.runtime is not None and snap.runtime.devices_ready is False


def _scan_schema_script() -> ModuleType:
    scripts = REPO / "scripts"
    if str(scripts) not in sys.path:
        sys.path.insert(0, str(scripts))
    spec = importlib.util.spec_from_file_location("scan_schema", scripts / "scan_schema.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["scan_schema"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_acme_scan_validates_against_the_schema_of_the_registry(tmp_path: Path) -> None:
    """``scan --format json`` of the acme node is valid against the shipped schema as
    ``scripts/scan_schema.py`` writes it with ``acme.VENDOR`` in ``VENDORS``: the vendor enum
    is the only part of the schema that names vendors."""
    snap = discover(_host(tmp_path), sources=registry.sources((*registry.VENDORS, VENDOR)))
    labels, warnings = label(snap, profiles=("neutral",))
    result = ScanResult(snap, labels, snapshot_features(snap), [*snap.warnings, *warnings])
    doc = json.loads(json.dumps(scan_document(result)))  # as `scan --format json` prints it
    assert [g["vendor"] for g in doc["gpus"]] == ["acme"]
    script = _scan_schema_script()
    shipped = script.SCHEMA.read_text(encoding="utf-8")
    assert script.render(script.schema(registry.VENDORS)) == shipped  # the enum is derived
    validator = jsonschema.Draft202012Validator(script.schema((*registry.VENDORS, VENDOR)))
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert not errors, errors[:5]


def test_without_the_registry_line_the_gpu_is_not_seen(tmp_path: Path) -> None:
    snap = discover(_host(tmp_path))
    assert snap.gpus == () and snap.driver_versions == {} and snap.vendor_driver_versions == {}
    assert [d.vendor for d in snap.pci] == ["1e3e"]


def test_a_vendors_driver_version_is_its_first_driver_with_a_module_version(
    tmp_path: Path,
) -> None:
    """``driver-versions`` reads each vendor's ``drivers`` in order: Intel's i915 before xe,
    AMD's amdgpu (its SR-IOV host driver gim is no container driver), none for a vendor
    without GPUs here or whose drivers have no module version."""
    step = system.vendor_versions(registry.by_pci_id((*registry.VENDORS, VENDOR)))
    gpus = tuple(
        Gpu(address=f"0000:0{i}:00.0", vendor=v, vendor_id="0", device_id="0", class_id="0300")
        for i, v in enumerate(("intel", "amd", "acme"))
    )
    modules = {"xe": "2", "i915": "1", "gim": "3", "nvidia": "550.54.15"}
    snap = Snapshot(root=str(tmp_path), gpus=gpus, driver_versions=modules)
    found = step.discover(Context(HostRoot(tmp_path)), snap).vendor_driver_versions
    assert found == {"intel": "1"}
    snap = dataclasses.replace(snap, driver_versions={**modules, "amdgpu": "6.10.5", "acme": ""})
    found = step.discover(Context(HostRoot(tmp_path)), snap).vendor_driver_versions
    assert found == {"intel": "1", "amd": "6.10.5"}
