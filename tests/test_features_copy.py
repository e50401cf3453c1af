"""features.copied_set: deepcopy's result, cheaper, for every shape a feature set may take
(``owned`` copies the gpu.* sets with it for the sinks)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nfd_gpu.features import copied_set, owned
from nfd_gpu.scan import run_scan
from tests.conftest import fixture_root


def _containers(x: Any, acc: set[int]) -> set[int]:
    if isinstance(x, (dict, list)):
        acc.add(id(x))
        for v in x.values() if isinstance(x, dict) else x:
            _containers(v, acc)
    return acc


ODD = {
    "flags": {"a.b": {"elements": {"x": {"y": 1}}}, "a.e": {"elements": {"x": {}}}},
    "attributes": {"a.c": {"elements": {"k": 1}, "extra": 2}, "a.f": {"elements": {"k": "v"}}},
    "instances": {
        "a.d": {"elements": [{"attributes": {"k": ["v"]}}]},
        "a.g": {"elements": [{"attributes": {"k": "v"}, "more": {}}]},
        "a.h": {"elements": ({"attributes": {"k": "v"}},)},
    },
    "other": [1, {"z": []}],
}


@pytest.mark.parametrize("which", ["fixture", "odd"])
def test_copied_set_is_deepcopy(which: str) -> None:
    f = run_scan(fixture_root("hgx-h100")).features if which == "fixture" else ODD
    got = {
        kind: {name: copied_set(kind, fs) for name, fs in sets.items()}
        if type(sets) is dict
        else copy.deepcopy(sets)
        for kind, sets in f.items()
    }
    assert got == copy.deepcopy(f)
    assert not _containers(got, set()) & _containers(f, set())  # nothing mutable shared
    own = owned(f)
    assert own == {
        k: {n: v for n, v in f.get(k, {}).items() if n.startswith("gpu.")}
        for k in ("flags", "attributes", "instances")
    }
    assert not _containers(own, set()) & _containers(f, set())
