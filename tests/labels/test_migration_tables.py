"""docs/migration.md "Compatibility profiles, key by key": the tables are read and checked
against nfd-gpu's profiles and the peers' outputs derived from the fixtures."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from nfd_gpu.config.sharing import load_sharing_config
from nfd_gpu.labels.nvidia import NvidiaOptions
from nfd_gpu.labels.options import PROFILE_OPTIONS
from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root
from tests.labels.amd_labeller_oracle import ALL_FLAGS, DAEMONSET_FLAGS, labeller_output
from tests.labels.gfd_oracle import gfd_outputs
from tests.labels.test_amd_labeller_oracle import AMD_FIXTURES, SKIPPED
from tests.labels.test_gfd_oracle import CHECKED, SHARING
from tests.rules.test_intel_rules import RULES

DOC = REPO / "docs" / "migration.md"
_TMP = tempfile.TemporaryDirectory()  # a variant fixture for cases(); removed at exit
STATUS = re.compile(r"^(identical|identical with option `([a-z-]+)`|differs because .+)$")
FLAG_OPTIONS = ("--gfd-timestamp",)
# Identical rows no fixture exercises against a peer oracle, with the test that covers them.
UNEXERCISED = {
    "nvidia.com/gpu.clique": "tests/labels/test_nvidia_options.py::test_clique_from_fabric_info",
    "nvidia.com/vgpu.host-driver-version": "tests/labels/test_nvidia_profile.py (GFD's -vgpu file)",
    "nvidia.com/vgpu.host-driver-branch": "tests/labels/test_nvidia_profile.py (GFD's -vgpu file)",
    "nvidia.com/gfd.timestamp": "tests/labels/test_nvidia_profile.py::test_timestamp_is_opt_in",
    "amd.com/gpu.mode": "tests/discovery/test_runtime_vgpu.py (the KubeVirt labeller's key)",
}
PEERS = {"nvidia": "GFD v0.19.0", "amd": "AMD k8s-node-labeller", "intel": "Intel NodeFeatureRules"}


@dataclass
class Row:
    key: str
    status: str
    option: str | None

    @property
    def regex(self) -> re.Pattern[str]:
        parts = re.split(r"<[a-z-]+>", self.key)
        return re.compile("^" + "[^=]+".join(re.escape(p) for p in parts) + "$")


def tables() -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    section = DOC.read_text().split("## Compatibility profiles, key by key", 1)[1]
    for block in section.split("\n### ")[1:]:
        title = block.splitlines()[0]
        peer = next(p for p, name in PEERS.items() if title.startswith(name))
        rows = []
        for line in block.splitlines():
            m = re.match(r"^\| `([^`]+)` \| (.+?) \|", line)
            if m:
                sm = STATUS.match(m.group(2))
                assert sm, f"{m.group(1)}: bad status {m.group(2)!r}"
                rows.append(Row(m.group(1), m.group(2), sm.group(2)))
        out[peer] = rows
    return out


@dataclass
class Case:
    """One node: nfd-gpu's labels by option set, and the peer's labels (with all flags)."""

    ours: dict[str, str]
    peer: dict[str, str]
    with_option: dict[str, dict[str, str]] = field(default_factory=dict)


@cache
def cases() -> dict[str, list[Case]]:
    nvidia = []
    for name in CHECKED:
        for strategy in ("none", "single", "mixed"):
            for sharing in (None, *SHARING):
                opts = (
                    load_sharing_config(str(sharing), strategy)
                    if sharing
                    else NvidiaOptions(mig_strategy=strategy)
                )
                ours = run_scan(fixture_root(name), profiles=["nvidia"], nvidia_options=opts).labels
                outs = gfd_outputs(fixture_root(name), strategy, sharing)
                stamp = NvidiaOptions(mig_strategy=strategy, timestamp=1767225600)
                on = run_scan(fixture_root(name), profiles=["nvidia"], nvidia_options=stamp)
                nvidia.append(
                    Case(ours, ours if ours in outs else outs[0], {"--gfd-timestamp": on.labels})
                )
    amd = []
    amd_options = [o for o, (p, _) in PROFILE_OPTIONS.items() if p == "amd"]
    # a node with two product names (the multi-value <kind>.<value> keys)
    two = Path(_TMP.name) / "mi210-two-names"
    shutil.copytree(fixture_root("mi210-8x"), two, symlinks=True)
    next(iter(sorted(two.glob("sys/devices/*/*/product_name")))).write_text("Instinct MI210X\n")
    for root in [*(fixture_root(n) for n in AMD_FIXTURES if n not in SKIPPED), two]:
        amd.append(
            Case(
                run_scan(root, profiles=("amd",)).labels,
                labeller_output(root, ALL_FLAGS),
                {
                    o: run_scan(root, profiles=("amd",), profile_options=(o,)).labels
                    for o in amd_options
                },
            )
        )
        assert set(labeller_output(root, DAEMONSET_FLAGS)) <= set(amd[-1].peer)
    intel = []
    for name in ("arc-a770", "flex170-sriov", "max1550-xe", "talos-arc-xe"):
        result = run_scan(fixture_root(name), profiles=("intel",))
        peer: dict[str, str] = {}
        for f in ("platform-labeling-rules.yaml", "node-feature-rules.yaml"):
            peer.update(evaluate(load_rules(RULES / f), result.features).labels)
        prefixes = ("gpu.intel.com/", "intel.feature.node.kubernetes.io/gpu")
        peer = {k: v for k, v in peer.items() if k.startswith(prefixes)}
        intel.append(Case(result.labels, peer))
    return {"nvidia": nvidia, "amd": amd, "intel": intel}


def _match(rows: list[Row], key: str) -> list[Row]:
    return [r for r in rows if r.regex.match(key)]


def test_tables_parse() -> None:
    t = tables()
    assert set(t) == set(PEERS)
    for peer, rows in t.items():
        assert len(rows) >= 10, peer
        for r in rows:
            if r.option:
                assert r.option in PROFILE_OPTIONS or r.option in FLAG_OPTIONS, r.key


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_every_key_either_side_writes_is_listed_once(peer: str) -> None:
    rows = tables()[peer]
    keys = set()
    for c in cases()[peer]:
        keys |= set(c.ours) | set(c.peer)
        for labels in c.with_option.values():
            keys |= set(labels)
    for key in sorted(keys):
        assert _match(rows, key), f"{key} is not in the {PEERS[peer]} table"


def _check(cs: list[Case], row: Row, pick: Callable[[Case], dict[str, str]]) -> int:
    """Keys of the row equal on every case; how many keys were compared."""
    seen = 0
    for c in cs:
        mine = {k: v for k, v in pick(c).items() if row.regex.match(k)}
        theirs = {k: v for k, v in c.peer.items() if row.regex.match(k)}
        assert mine == theirs, (row.key, mine, theirs)
        seen += len(mine)
    return seen


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_identical_rows_hold(peer: str) -> None:
    rows = tables()[peer]
    cs = cases()[peer]
    for row in rows:
        if row.status.startswith("differs"):
            continue
        if row.option is None:
            seen = _check(cs, row, lambda c: c.ours)
        else:
            # absent by default, identical with the option
            assert not any(row.regex.match(k) for c in cs for k in c.ours), row.key
            seen = 0
            if row.key not in UNEXERCISED:
                seen = _check(cs, row, lambda c, o=row.option: c.with_option[o])
            else:
                seen = sum(1 for c in cs for k in c.with_option[row.option] if row.regex.match(k))
        assert seen or row.key in UNEXERCISED, f"{row.key}: no fixture exercises it"
