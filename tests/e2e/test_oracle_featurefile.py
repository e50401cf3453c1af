"""Every feature file nfd-gpu writes, read by NFD's own local source and
nfd-worker's label filter (nfd-oracle featurefile): the labels NFD takes are
exactly the labels nfd-gpu meant, and the raw features come through too."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nfd_gpu.labels.registry import PROFILES
from nfd_gpu.scan import run_scan
from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.featurefile import MAX_FILE_SIZE, FeatureFileSink, raw_feature_lines
from tests.conftest import ALL_FIXTURES, fixture_root
from tests.e2e.oracle import run_oracle
from tests.sinks.nfd_local_parser import parse_feature_file


def nfd_reads(path: Path) -> dict[str, Any]:
    res = run_oracle("featurefile", str(path))
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def write(directory: Path, pub: Publication, raw: bool = True) -> Path:
    FeatureFileSink(str(directory), raw_features=raw).publish(pub)
    return directory / "nfd-gpu"


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_feature_file_reads_back_in_nfd(tmp_path: Path, name: str, profile: str) -> None:
    scan = run_scan(fixture_root(name), profiles=(profile,))
    path = write(tmp_path, Publication(scan.labels, scan.features))
    got = nfd_reads(path)
    assert got["labels"] == scan.labels
    want_raw = dict(scan.labels)
    if path.stat().st_size <= MAX_FILE_SIZE:
        want_raw.update((k, v) for k, v in raw_feature_lines(scan.features) if k not in want_raw)
    assert got["features"]["local.label"] == scan.labels
    assert got["features"]["local.feature"] == want_raw


def test_oversized_raw_features_dropped_labels_kept(tmp_path: Path) -> None:
    labels = {"gpu.feature.node.kubernetes.io/present": "true"}
    big = {
        "flags": {},
        "attributes": {"gpu.big": {"elements": {f"k{i}": "v" * 60 for i in range(2000)}}},
        "instances": {},
    }
    path = write(tmp_path, Publication(labels, big))
    assert path.stat().st_size <= MAX_FILE_SIZE
    assert nfd_reads(path)["labels"] == labels


def test_file_over_nfd_limit_is_ignored_by_nfd(tmp_path: Path) -> None:
    """What nfd-gpu refuses to write (SinkError), NFD would have dropped whole."""
    huge = {f"gpu.feature.node.kubernetes.io/l{i}": "x" * 60 for i in range(1500)}
    with pytest.raises(SinkError):
        write(tmp_path, Publication(huge))
    body = "".join(f"{k}={v}\n" for k, v in huge.items())
    (tmp_path / "big").write_text(body)
    assert nfd_reads(tmp_path / "big")["labels"] == {}


_text = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    labels=st.dictionaries(_text, _text, max_size=12),
    raw=st.dictionaries(_text, _text, max_size=12),
)
def test_hostile_labels_and_features(
    tmp_path_factory: pytest.TempPathFactory, labels: dict[str, str], raw: dict[str, str]
) -> None:
    """Arbitrary strings: NFD takes only labels nfd-gpu asked for, with their value,
    and exactly what the project's model of NFD's parser says."""
    d = tmp_path_factory.mktemp("ff")
    feats: dict[str, Any] = {"flags": {}, "attributes": {"x": {"elements": raw}}, "instances": {}}
    try:
        path = write(d, Publication(labels, feats))
    except SinkError:
        return
    got = nfd_reads(path)["labels"]
    assert all(labels.get(k) == v for k, v in got.items())
    model, _ = parse_feature_file(path.read_bytes(), dt.datetime.now(dt.timezone.utc))
    # nfd-worker also drops names and values that are not valid label syntax.
    assert set(got) <= set(model) and all(model[k] == v for k, v in got.items())


def test_expired_file_gives_no_labels(tmp_path: Path) -> None:
    sink = FeatureFileSink(str(tmp_path), expiry=1.0, clock=lambda: time.time() - 3600)
    sink.publish(Publication({"gpu.feature.node.kubernetes.io/present": "true"}))
    assert nfd_reads(tmp_path / "nfd-gpu")["labels"] == {}
