"""Property tests: arbitrary bytes in any sysfs / procfs file never crash a scan
and never yield an invalid label or a non-string feature value."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nfd_gpu.labels.validate import check_label
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root

PROPERTY_FIXTURES = ("hgx-h100", "mi210-8x", "flex170-sriov", "workstation-rtx4090")


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, list[str]]]]:
    out = {}
    for name in PROPERTY_FIXTURES:
        root = tmp_path_factory.mktemp(name) / "root"
        shutil.copytree(fixture_root(name), root, symlinks=True)
        files = sorted(
            str(p.relative_to(root))
            for top in ("sys", "proc")
            for p in (root / top).rglob("*")
            if p.is_file() and not p.is_symlink()
        )
        out[name] = (root, files)
    yield out


def assert_valid(root: Path) -> None:
    r = run_scan(root)
    for k, v in r.labels.items():
        check_label(k, v)
    json.dumps(r.features)
    for kind in ("attributes",):
        for fs in r.features[kind].values():
            assert all(isinstance(v, str) for v in fs["elements"].values())
    for fs in r.features["instances"].values():
        for inst in fs["elements"]:
            assert all(isinstance(v, str) for v in inst["attributes"].values())


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fixture=st.sampled_from(PROPERTY_FIXTURES),
    index=st.integers(min_value=0),
    data=st.binary(max_size=300),
    op=st.sampled_from(["bytes", "bytes", "bytes", "dir", "dangling", "empty"]),
)
def test_any_file_any_bytes(
    trees: dict[str, tuple[Path, list[str]]], fixture: str, index: int, data: bytes, op: str
) -> None:
    root, files = trees[fixture]
    rel = files[index % len(files)]
    path = root / rel
    original = path.read_bytes()
    try:
        if op == "bytes":
            path.write_bytes(data)
        elif op == "empty":
            path.write_bytes(b"")
        elif op == "dir":
            path.unlink()
            path.mkdir()
        else:
            path.unlink()
            os.symlink("does-not-exist", path)
        assert_valid(root)
    finally:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.write_bytes(original)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(st.text(max_size=40), max_size=8))
def test_uevent_text(trees: dict[str, tuple[Path, list[str]]], lines: list[str]) -> None:
    root, _ = trees["hgx-h100"]
    path = root / "sys/devices/pci0000:18/0000:18:00.0/uevent"
    original = path.read_bytes()
    try:
        path.write_text("\n".join(lines), errors="surrogateescape")
        assert_valid(root)
    finally:
        path.write_bytes(original)
