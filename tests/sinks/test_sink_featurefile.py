"""Feature-file sink: NFD-readable, atomic, bounded, rewritten only when needed."""

from __future__ import annotations

import datetime as dt
import io
import os
import stat
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.featurefile import MAX_FILE_SIZE, FeatureFileSink
from tests.sinks.nfd_local_parser import parse_feature_file, parse_features_dir

NFD_TESTDATA = os.path.join(os.path.dirname(__file__), "data", "nfd-local-testdata", "features.d")
NOW = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)

LABELS = {
    "gpu.feature.node.kubernetes.io/present": "true",
    "gpu.feature.node.kubernetes.io/count": "8",
    "gpu.feature.node.kubernetes.io/product": "NVIDIA-H100-80GB-HBM3",
    "gpu.feature.node.kubernetes.io/nvidia.driver.version": "550.54.15",
}
FEATURES: dict[str, dict[str, Any]] = {
    "flags": {"gpu.capability": {"elements": {"mig": {}}}},
    "attributes": {"gpu.driver": {"elements": {"version": "550.54.15", "name": "nvidia"}}},
    "instances": {"gpu.device": {"elements": [{"attributes": {"vendor": "10de", "index": "0"}}]}},
}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def now_ts() -> float:
    return NOW.timestamp()


# -- the test parser against NFD's own test data ---------------------------------------


def test_parser_matches_nfd_testdata_totals() -> None:
    # nfd source/local/local_test.go TestGetExpirationDate: 7 features, 8 labels.
    labels, features = parse_features_dir(NFD_TESTDATA, NOW)
    assert len(features) == 7
    assert len(labels) == 8
    assert "hiddenFeatureKey" not in labels  # .my.feature: dotfile
    assert "featureKeyValid2" not in labels  # big_file: over 65,536 bytes
    assert "featureKeyExpired" not in labels
    assert labels["featureKeyUnparsable"] == "featureValue"  # bad expiry keeps "now"
    assert {"featureKey2", "featureKey3"} <= labels.keys()
    assert "featureKey" not in labels and "featureKey4" not in labels


def test_parser_no_label_no_feature_directives() -> None:
    with open(os.path.join(NFD_TESTDATA, "features_with_labels"), "rb") as f:
        labels, features = parse_feature_file(f.read(), NOW)
    assert labels == {"label-only": "value", "label-only-2": "value", "my-feature": "value"}
    assert features == {"my-feature": "value", "foo": "baz"}


# -- what the sink writes --------------------------------------------------------------


def test_written_file_parses_into_exactly_the_labels(tmp_path: Any) -> None:
    sink = FeatureFileSink(str(tmp_path), clock=Clock(now_ts()))
    assert sink.publish(Publication(LABELS, FEATURES)) is True
    path = tmp_path / "nfd-gpu"
    labels, _ = parse_features_dir(str(tmp_path), NOW)
    assert labels == LABELS
    text = path.read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == sorted(lines)
    assert "# +expiry-time=2025-01-01T01:00:00Z\n" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    # expired from NFD's point of view after the expiry
    later = NOW + dt.timedelta(hours=2)
    assert parse_features_dir(str(tmp_path), later) == ({}, {})


def test_raw_features_are_no_label_lines(tmp_path: Any) -> None:
    sink = FeatureFileSink(str(tmp_path), raw_features=True, clock=Clock(now_ts()))
    sink.publish(Publication(LABELS, FEATURES))
    labels, features = parse_features_dir(str(tmp_path), NOW)
    assert labels == LABELS
    assert features["gpu.driver.version"] == "550.54.15"
    assert features["gpu.capability.mig"] == "true"
    assert features["gpu.device.0.vendor"] == "10de"
    assert set(features) - set(LABELS) == {
        "gpu.driver.version",
        "gpu.driver.name",
        "gpu.capability.mig",
        "gpu.device.0.vendor",
        "gpu.device.0.index",
    }


def test_raw_features_are_only_nfd_gpus_own(tmp_path: Any) -> None:
    """NFD's own features (nfd-worker publishes them) stay out of the file; gpu.* instances
    are flattened to local.feature keys <feature>.<index>.<attr>, as NFD's local source
    stores every line (tests/sinks/nfd_local_parser.py)."""
    feats: dict[str, dict[str, Any]] = {
        "flags": {"kernel.loadedmodule": {"elements": {"nvidia": {}}}},
        "attributes": {"gpu.node": {"elements": {"count": "1"}}},
        "instances": {
            "pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]},
            "gpu.device": {"elements": [{"attributes": {"vendor": "nvidia"}}]},
        },
    }
    FeatureFileSink(str(tmp_path), raw_features=True, clock=Clock(now_ts())).publish(
        Publication({}, feats)
    )
    labels, features = parse_features_dir(str(tmp_path), NOW)
    assert labels == {}
    assert features == {"gpu.node.count": "1", "gpu.device.0.vendor": "nvidia"}


def test_raw_feature_colliding_with_label_does_not_delete_it(tmp_path: Any) -> None:
    feats: dict[str, dict[str, Any]] = {
        "flags": {},
        "attributes": {"gpu.feature.node.kubernetes.io/count": {"elements": {}}},
        "instances": {},
    }
    feats["attributes"]["gpu.a"] = {"elements": {"b": "x"}}
    labels = {"gpu.a.b": "label"}
    FeatureFileSink(str(tmp_path), raw_features=True, clock=Clock(now_ts())).publish(
        Publication(labels, feats)
    )
    assert parse_features_dir(str(tmp_path), NOW)[0] == labels


def test_rewrite_only_on_change_or_to_refresh_expiry(tmp_path: Any) -> None:
    clock = Clock(now_ts())
    sink = FeatureFileSink(str(tmp_path), expiry=600, clock=clock)
    path = tmp_path / "nfd-gpu"
    assert sink.publish(Publication(LABELS)) is True
    first = path.stat()
    clock.t += 200
    assert sink.publish(Publication(LABELS)) is False
    assert path.stat().st_ino == first.st_ino
    clock.t += 150  # 350 s: less than half the expiry left -> refresh
    assert sink.publish(Publication(LABELS)) is True
    assert path.stat().st_ino != first.st_ino
    assert "# +expiry-time=2025-01-01T00:15:50Z" in path.read_text()
    changed = {**LABELS, "gpu.feature.node.kubernetes.io/count": "9"}
    assert sink.publish(Publication(changed)) is True
    path.unlink()  # removed by someone else: written again
    assert sink.publish(Publication(changed)) is True
    assert parse_features_dir(str(tmp_path), NOW)[0] == changed


def test_crash_between_temp_write_and_rename_keeps_old_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = FeatureFileSink(str(tmp_path), clock=Clock(now_ts()))
    sink.publish(Publication(LABELS))
    before = (tmp_path / "nfd-gpu").read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError(5, "injected crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(SinkError, match="nfd-gpu: cannot write feature file"):
        sink.publish(Publication({**LABELS, "gpu.feature.node.kubernetes.io/count": "9"}))
    assert (tmp_path / "nfd-gpu").read_bytes() == before
    assert os.listdir(tmp_path) == ["nfd-gpu"]  # temp file cleaned up


def test_killed_process_before_rename_keeps_old_file(tmp_path: Any) -> None:
    """A real crash: the writer process dies (SIGKILL) after writing+fsyncing the temp
    file, before the rename. The old file is intact and NFD ignores the dotfile."""
    sink = FeatureFileSink(str(tmp_path), clock=Clock(now_ts()))
    sink.publish(Publication(LABELS))
    before = (tmp_path / "nfd-gpu").read_bytes()
    script = textwrap.dedent(
        f"""
        import os, signal
        from nfd_gpu.sinks import Publication
        from nfd_gpu.sinks.featurefile import FeatureFileSink
        os.replace = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)
        FeatureFileSink({str(tmp_path)!r}).publish(Publication({{"x/y": "1"}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=30)
    assert proc.returncode == -9
    assert (tmp_path / "nfd-gpu").read_bytes() == before
    leftovers = [n for n in os.listdir(tmp_path) if n != "nfd-gpu"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".")
    assert parse_features_dir(str(tmp_path), NOW)[0] == LABELS


def test_oversized_raw_features_are_dropped_first(tmp_path: Any) -> None:
    big: dict[str, dict[str, Any]] = {
        "flags": {},
        "attributes": {"gpu.big": {"elements": {f"k{i}": "v" * 60 for i in range(2000)}}},
        "instances": {},
    }
    sink = FeatureFileSink(str(tmp_path), raw_features=True, clock=Clock(now_ts()))
    assert sink.publish(Publication(LABELS, big)) is True
    assert (tmp_path / "nfd-gpu").stat().st_size <= MAX_FILE_SIZE
    assert parse_features_dir(str(tmp_path), NOW)[0] == LABELS


def test_oversized_labels_fail_loudly_and_keep_old_file(tmp_path: Any) -> None:
    sink = FeatureFileSink(str(tmp_path), clock=Clock(now_ts()))
    sink.publish(Publication(LABELS))
    before = (tmp_path / "nfd-gpu").read_bytes()
    huge = {f"gpu.feature.node.kubernetes.io/l{i}": "x" * 60 for i in range(1500)}
    with pytest.raises(SinkError, match="over NFD's limit of 65536; kept the previous file"):
        sink.publish(Publication(huge))
    assert (tmp_path / "nfd-gpu").read_bytes() == before
    assert os.listdir(tmp_path) == ["nfd-gpu"]


def test_remove_on_exit(tmp_path: Any) -> None:
    keep = FeatureFileSink(str(tmp_path / "a"), clock=Clock(now_ts()))
    keep.publish(Publication(LABELS))
    keep.close()
    assert (tmp_path / "a" / "nfd-gpu").exists()
    rm = FeatureFileSink(str(tmp_path / "b"), remove_on_exit=True, clock=Clock(now_ts()))
    rm.publish(Publication(LABELS))
    rm.close()
    assert not (tmp_path / "b" / "nfd-gpu").exists()


_text = st.text(st.characters(codec="utf-8"), max_size=80)


@settings(max_examples=150, deadline=None)
@given(
    labels=st.dictionaries(_text, _text, max_size=30),
    raw=st.dictionaries(_text, _text, max_size=30),
)
def test_any_input_never_adds_lines_or_exceeds_limit(
    tmp_path_factory: pytest.TempPathFactory, labels: dict[str, str], raw: dict[str, str]
) -> None:
    d = tmp_path_factory.mktemp("ff")
    feats: dict[str, dict[str, Any]] = {
        "flags": {},
        "attributes": {"gpu.x": {"elements": raw}},
        "instances": {},
    }
    try:
        FeatureFileSink(str(d), raw_features=True, clock=Clock(now_ts())).publish(
            Publication(labels, feats)
        )
    except SinkError:
        assert not (d / "nfd-gpu").exists()
        return
    assert (d / "nfd-gpu").stat().st_size <= MAX_FILE_SIZE
    parsed, _ = parse_features_dir(str(d), NOW)
    # every parsed label is one we asked for, with exactly its value
    assert all(labels.get(k) == v for k, v in parsed.items())


def test_dry_run_prints_what_and_when_the_sink_writes(tmp_path: Any) -> None:
    """``--dry-run``'s feature file is the sink's own decisions, printed: the same passes
    print (first write, change, expiry refresh, not a pass in between), the same bytes
    (expiry, raw features dropped over NFD's limit), the same refusal of oversized labels;
    nothing is read or written on disk."""
    from nfd_gpu.config.loader import Config
    from nfd_gpu.sinks.featurefile import OUTPUT

    big: dict[str, dict[str, Any]] = {
        "flags": {},
        "attributes": {"gpu.big": {"elements": {f"k{i}": "v" * 60 for i in range(2000)}}},
        "instances": {},
    }
    changed = {**LABELS, "gpu.feature.node.kubernetes.io/count": "9"}
    huge = {f"gpu.feature.node.kubernetes.io/l{i}": "x" * 60 for i in range(1500)}
    passes = [(0, LABELS), (200, LABELS), (150, LABELS), (10, changed), (10, huge)]
    real_dir, dry_dir = tmp_path / "real", tmp_path / "dry"
    real_dir.mkdir()
    cfg = Config(features_dir=str(dry_dir), expiry=600, raw_features=True)
    out = io.StringIO()
    dry = OUTPUT.dry_run(cfg, out)
    assert isinstance(dry, FeatureFileSink)
    dry.clock = clock = Clock(now_ts())
    real = FeatureFileSink(str(real_dir), expiry=600, raw_features=True, clock=clock)
    for step, labels in passes:
        clock.t += step
        pub = Publication(labels, big)
        if labels is huge:
            for sink in (real, dry):
                with pytest.raises(SinkError, match="over NFD's limit"):
                    sink.publish(pub)
            continue
        before = out.tell()
        wrote = real.publish(pub)
        assert dry.publish(pub) is wrote
        printed = out.getvalue()[before:]
        if wrote:
            head, _, body = printed.partition("\n")
            assert head == f"# would write {dry_dir}/nfd-gpu"
            assert body == (real_dir / "nfd-gpu").read_text()
        else:
            assert printed == ""
    assert not dry_dir.exists()


def test_dry_run_leaves_the_file_on_exit(tmp_path: Any) -> None:
    """``--dry-run --remove-on-exit``: the dry run removes nothing (it touches no file)."""
    from nfd_gpu.config.loader import Config
    from nfd_gpu.sinks.featurefile import OUTPUT

    path = tmp_path / "nfd-gpu"
    path.write_text("gpu.feature.node.kubernetes.io/count=8\n")
    cfg = Config(features_dir=str(tmp_path), remove_on_exit=True)
    dry = OUTPUT.dry_run(cfg, io.StringIO())
    assert dry.publish(Publication(LABELS)) is True
    dry.close()
    assert path.read_text() == "gpu.feature.node.kubernetes.io/count=8\n"
