"""Snapshot JSON round-trip and the feature shape."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

import nfd_gpu
from nfd_gpu.featuremap import snapshot_features
from nfd_gpu.model import (
    GPU_JSON,
    JSON_FIELD,
    V1_IN_SOURCES,
    AmdGpu,
    Gpu,
    IntelGpu,
    NvidiaGpu,
    PciDevice,
    Record,
    Snapshot,
    gpu_to_dict,
)
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, fixture_root


@pytest.mark.parametrize("nvml", ["auto", "off"])
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_snapshot_json_round_trip(name: str, nvml: str) -> None:
    """The JSON form loads back to the same snapshot, the facts v1 records in ``sources``
    (V1_IN_SOURCES) included, NVML replayed and off."""
    snap = run_scan(fixture_root(name), nvml=nvml).snapshot
    again = Snapshot.from_json(snap.to_json())
    assert again == snap
    assert snapshot_features(again) == snapshot_features(snap)


# fixture -> (field, record, the values its GPUs hold) for each fact v1 has no key for:
# each value each fact takes is carried through ``sources`` by some fixture
V1_SOURCES_CASES = [
    ("mi300x-cpx-nps4", "compute_partitioning_supported", "amd", {True}),
    ("mi300x-cpx-nps4", "memory_partitioning_supported", "amd", {True}),
    ("mi210-8x", "compute_partitioning_supported", "amd", {False}),
    ("nvidia-vgpu-guest", "vgpu_capability", "nvidia", {True}),
    ("h200-vm", "vgpu_capability", "nvidia", {False}),
    ("hgx-h100", "vgpu_capability", "nvidia", {None}),
    ("h100-gpu-lost", "nvml_answered", "nvidia", {True, False}),
    ("h100-no-driver", "nvml_answered", "nvidia", {False}),
]


@pytest.mark.parametrize(("name", "fact", "rec", "values"), V1_SOURCES_CASES)
def test_v1_keeps_facts_in_sources(name: str, fact: str, rec: str, values: set[object]) -> None:
    """The facts V1_IN_SOURCES reads back are not keys of the scan JSON (v1's schema allows
    none) and come back from ``sources`` with the value discovery gave them."""
    snap = run_scan(fixture_root(name)).snapshot
    d = json.loads(snap.to_json())
    assert all(fact not in g for g in d["gpus"])
    assert {getattr(getattr(g, rec), fact) for g in snap.gpus} == values
    again = Snapshot.from_dict(d)
    assert [getattr(getattr(g, rec), fact) for g in again.gpus] == [
        getattr(getattr(g, rec), fact) for g in snap.gpus
    ]


RECORDS = {"nvidia": NvidiaGpu, "amd": AmdGpu, "intel": IntelGpu}


def test_gpu_json_table_names_every_fact_once() -> None:
    """GPU_JSON holds each field of Gpu (but the vendor records) and of each vendor record,
    once and under the right record: a new fact without its row, or a row without its
    field, fails here. A renamed field keeps its v1 key (JSON_FIELD)."""
    rows = [JSON_FIELD.get(key, key) for key, _ in GPU_JSON]
    assert len(rows) == len(set(rows))
    assert not set(rows) & set(V1_IN_SOURCES)
    keyed = {**{JSON_FIELD.get(k, k): r for k, r in GPU_JSON}}
    keyed.update({name: rec for name, (rec, _) in V1_IN_SOURCES.items()})
    own = [f.name for f in dataclasses.fields(Gpu) if f.name not in RECORDS]
    assert sorted(k for k, rec in keyed.items() if rec == "gpu") == sorted(own)
    for rec, cls in RECORDS.items():
        fields = [f.name for f in dataclasses.fields(cls)]
        assert sorted(k for k, r in keyed.items() if r == rec) == sorted(fields), rec
    assert {rec for _, rec in GPU_JSON} == {"gpu", *RECORDS}


def test_gpu_json_is_flat() -> None:
    """The vendor records do not show in the JSON form: one flat object per GPU, every key
    on every GPU, an NVIDIA GPU's AMD and Intel keys null."""
    snap = run_scan(fixture_root("h200-vm")).snapshot
    d = gpu_to_dict(snap.gpus[0])
    assert list(d) == [k for k, _ in GPU_JSON]
    assert d["mig_capable"] is True and d["gfx"] is None and d["tiles"] is None
    assert d["sources"] == snap.gpus[0].provenance and "provenance" not in d  # v1's key
    assert json.loads(snap.to_json())["gpus"][0] == json.loads(json.dumps(d))


def test_pci_device_in_nfd_shape() -> None:
    feats = run_scan(fixture_root("hgx-h100")).features
    insts = feats["instances"]["pci.device"]["elements"]
    h100 = [i["attributes"] for i in insts if i["attributes"]["device"] == "2330"]
    assert len(h100) == 8
    assert h100[0] == {
        "class": "0302",
        "vendor": "10de",
        "device": "2330",
        "subsystem_vendor": "10de",
        "subsystem_device": "16c1",
        "iommu_group/type": "DMA-FQ",
    }
    nic = [i["attributes"] for i in insts if i["attributes"]["device"] == "101d"]
    assert nic[0]["sriov_totalvfs"] == "8"


def test_gpu_features() -> None:
    feats = run_scan(fixture_root("mi210-8x")).features
    devs = feats["instances"]["gpu.device"]["elements"]
    assert len(devs) == 8
    a = devs[0]["attributes"]
    assert a["vendor"] == "amd" and a["gfx"] == "gfx90a" and a["family"] == "cdna2"
    assert a["class"] == "1200" and a["driver"] == "amdgpu"
    node = feats["attributes"]["gpu.node"]["elements"]
    assert node["count"] == "8" and node["amd.gfx"] == "gfx90a"
    assert "amdgpu" in feats["flags"]["kernel.loadedmodule"]["elements"]


def test_no_gpu_node_has_no_gpu_features() -> None:
    feats = run_scan(fixture_root("vm-no-gpu")).features
    assert "gpu.device" not in feats["instances"]
    assert "gpu.node" not in feats["attributes"]
    assert len(feats["instances"]["pci.device"]["elements"]) == 6


# The one provenance key naming a fact held in two fields (nfd-gpu/v1 publishes it so)
COMPOUND_FACTS = {"compute_capability": ("compute_major", "compute_minor")}


def _facts() -> dict[str, str]:
    """Every fact name (a field of Gpu or of a vendor record) -> its record."""
    facts = {f.name: "gpu" for f in dataclasses.fields(Gpu) if f.name not in RECORDS}
    for rec, cls in RECORDS.items():
        facts.update({f.name: rec for f in dataclasses.fields(cls)})
    return facts


@pytest.mark.parametrize("nvml", ["auto", "off"])
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_provenance_key_names_a_fact(name: str, nvml: str) -> None:
    """Gpu.provenance says where facts came from and holds none: each key of every GPU of
    every fixture (NVML replayed and off) names a field that holds the fact, and that
    fact is known (not None), so a key that names nothing fails."""
    facts = _facts()
    for g in run_scan(fixture_root(name), nvml=nvml).snapshot.gpus:
        assert "provenance" not in g.provenance
        for key in g.provenance:
            names = COMPOUND_FACTS.get(key, (key,))
            assert all(n in facts for n in names), f"{g.address}: {key!r} names no fact"
            values = [getattr(g if facts[n] == "gpu" else getattr(g, facts[n]), n) for n in names]
            assert None not in values, f"{g.address}: {key!r} has provenance, no value"


def test_only_discovery_reads_provenance() -> None:
    """Labels, features and rules read the typed facts: outside discovery (which records
    provenance, and derives the family's from its inputs') no module reads
    ``.provenance``; it reaches users only as the scan JSON's ``sources``."""
    package = Path(nfd_gpu.__file__).parent
    readers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "discovery" not in path.relative_to(package).parts
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "provenance"
    )
    assert readers == []


def _records() -> list[type]:
    return [c for c in vars(nfd_gpu.model).values()
            if isinstance(c, type) and dataclasses.is_dataclass(c)]  # fmt: skip


def _reference(cls: type) -> type:
    """The same fields as a plain frozen dataclass: its own compiled eq, hash and repr."""
    fields = [(f.name, f.type, f) for f in dataclasses.fields(cls)]
    ref = dataclasses.make_dataclass(cls.__name__, fields, frozen=True)
    ref.__qualname__ = cls.__qualname__
    return ref


@pytest.mark.parametrize("name", ["hgx-h100", "mi300x-cpx-nps4", "h200-vm"])
def test_records_compare_hash_and_print_as_dataclasses_do(name: str) -> None:
    """The model's records share Record's __eq__, __hash__ and __repr__ (compiling the
    dataclass's own cost every start ~3.5 ms): they behave exactly as those would."""
    snap = run_scan(fixture_root(name)).snapshot
    recs = [snap, *snap.pci, *snap.gpus, *snap.partitions, *snap.vgpu_types]
    recs += [x for g in snap.gpus for x in (g.nvidia, g.amd, g.intel, g.health, g.link) if x]
    recs += [snap.runtime] if snap.runtime else []
    assert {type(r) for r in recs} >= {Snapshot, Gpu, PciDevice}
    for r in recs:
        cls = type(r)
        assert "__eq__" not in vars(cls) and "__repr__" not in vars(cls)  # Record's
        ref = _reference(cls)
        values = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
        first = dataclasses.fields(r)[0].name
        twin, other = cls(**values), dataclasses.replace(r, **{first: object()})
        assert repr(r) == repr(ref(**values))
        assert (r == twin, r == other, r != twin) == (True, False, False)
        assert r.__eq__(ref(**values)) is NotImplemented  # another class is never equal
        try:
            want = hash(ref(**values))
        except TypeError:  # a dict field: unhashable, as the dataclass is
            with pytest.raises(TypeError):
                hash(r)
        else:
            assert hash(r) == want == hash(twin)
        # frozen to the type checker (tests/test_record.py), no compiled __setattr__
        assert "__setattr__" not in vars(cls) and "__delattr__" not in vars(cls)


def test_every_record_shares_the_compiled_once_methods() -> None:
    assert len(_records()) == 13
    for cls in _records():
        assert issubclass(cls, Record) and not hasattr(cls(*_required(cls)), "__dict__")


def _required(cls: type) -> list[object]:
    missing = dataclasses.MISSING
    return [""] * sum(f.default is missing and f.default_factory is missing  # type: ignore[misc]
                      for f in dataclasses.fields(cls))  # fmt: skip


def _package_records() -> list[type]:
    """Every class of nfd_gpu built on Record, each module imported (optional ones skipped)."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(nfd_gpu.__path__, "nfd_gpu."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional dependency absent here
            continue
    todo, seen = [Record], []
    while todo:
        for sub in todo.pop().__subclasses__():
            seen.append(sub)
            todo.append(sub)
    return seen


def test_records_on_record_are_the_ones_it_is_right_for() -> None:
    """Record's eq, hash and repr are the dataclass's own only for a record (frozen to the
    type checker, nfd_gpu/record.py) that asks for neither and whose every field compares,
    hashes and prints by default."""
    recs = _package_records()
    assert len(recs) >= 40 and set(_records()) <= set(recs)
    for cls in recs:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert dataclasses.is_dataclass(cls) and not params.frozen, cls  # by record()
        assert not params.eq and not params.repr and not params.order, cls
        assert {"__eq__", "__hash__", "__repr__"}.isdisjoint(vars(cls)), cls
        for f in dataclasses.fields(cls):
            assert (f.compare, f.repr, f.hash) == (True, True, None), (cls, f.name)
