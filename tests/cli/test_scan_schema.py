"""``scan --format json|yaml`` carries ``apiVersion: nfd-gpu/v1`` and validates against the
shipped JSON Schema (nfd_gpu/data/scan-v1.schema.json) for every fixture."""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml

from nfd_gpu import cli, model
from nfd_gpu.discovery.registry import VENDORS
from tests.conftest import ALL_FIXTURES, fixture_root


def _schema() -> dict[str, Any]:
    text = resources.files("nfd_gpu").joinpath("data/scan-v1.schema.json").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


VALIDATOR = jsonschema.Draft202012Validator(_schema())


def _scan(capsys: pytest.CaptureFixture[str], name: str, fmt: str) -> Any:
    assert cli.main(["scan", "--root", str(fixture_root(name)), "-p", "neutral", "-p", "nvidia",
                     "-p", "amd", "-p", "intel", "--format", fmt]) == 0  # fmt: skip
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else yaml.safe_load(out)


def test_schema_is_valid_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(_schema())


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_output_validates(capsys: pytest.CaptureFixture[str], name: str) -> None:
    doc = _scan(capsys, name, "json")
    assert doc["apiVersion"] == cli.SCAN_API_VERSION == "nfd-gpu/v1"
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(doc)]
    assert not errors, errors[:5]


def test_yaml_output_is_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _scan(capsys, "mi300x-sriov-host", "yaml")
    assert doc == _scan(capsys, "mi300x-sriov-host", "json")
    VALIDATOR.validate(doc)


def test_schema_gpu_fields_match_the_model() -> None:
    """Every key of a GPU's flat JSON form (model.GPU_JSON, the Gpu fields and its vendor
    records' fields) is described (and required), and nothing else: additionalProperties
    is false, so a new model field fails here until the schema names it."""
    gpu = _schema()["$defs"]["gpu"]
    fields = [key for key, _ in model.GPU_JSON]
    assert sorted(gpu["properties"]) == sorted(fields)
    assert sorted(gpu["required"]) == sorted(fields)
    assert gpu["additionalProperties"] is False


def test_schema_vendor_enum_is_the_registry() -> None:
    """The vendor enum names ``registry.VENDORS`` in order (``python scripts/scan_schema.py``
    writes it)."""
    enum = _schema()["$defs"]["gpu"]["properties"]["vendor"]["enum"]
    assert enum == [v.name for v in VENDORS]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("apiVersion",), "nfd-gpu/v2"),
        (("labels", "gpu.feature.node.kubernetes.io/count"), 8),
        (("labels", "bad key!"), "x"),
        (("gpus", 0, "vendor"), "matrox"),
        (("gpus", 0, "address"), "5:00.0"),
        (("gpus", 0, "memory_mib"), "81559"),
        (("features", "attributes", "gpu.node", "elements", "count"), 8),
        (("unexpected",), 1),
    ],
)
def test_schema_rejects_wrong_documents(
    capsys: pytest.CaptureFixture[str], path: tuple[Any, ...], value: Any
) -> None:
    doc = _scan(capsys, "hgx-h100", "json")
    VALIDATOR.validate(doc)
    bad = copy.deepcopy(doc)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert not VALIDATOR.is_valid(bad), path
