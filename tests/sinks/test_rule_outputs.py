"""Which output each shipped rule file needs (docs/rules.md "Where a rule runs").

Each file of rules/ and deploy/examples/nodefeaturerules.yaml is evaluated three ways on
the fixtures: by nfd-gpu itself (every feature of the scan), and by nfd-master on what a
node's objects carry with each output: nfd-worker's own features (``pci.device``,
``kernel.loadedmodule``; the scan's stand in for them) merged with

* the NodeFeature nfd-gpu writes (``spec.features``: ``gpu.*`` only), or
* the feature file nfd-gpu writes (``--raw-features``), read as NFD's ``local`` source
  reads it (``local.label`` / ``local.feature`` attributes).

The table in docs/rules.md must say where each file works, and be right.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from nfd_gpu import features
from nfd_gpu.rules import evaluate, load_rules
from nfd_gpu.scan import run_scan
from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.featurefile import FeatureFileSink
from nfd_gpu.sinks.nodefeature import NodeFeatureSink
from tests.sinks.nfd_local_parser import parse_features_dir

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sysfs"
RULE_FILES = sorted(
    str(p.relative_to(REPO))
    for p in [*REPO.glob("rules/*.yaml"), REPO / "deploy/examples/nodefeaturerules.yaml"]
)
# Fixtures where the shipped rules match (each file must match on at least one).
ON = ["hgx-h100", "h100-mig-single", "mi300x-cpx-nps4", "mi210-8x", "flex170-sriov", "max1550-xe",
      "h100-remap-pending-all"]  # fmt: skip
NFD_OWN = ("pci.device", "kernel.loadedmodule", "kernel.enabledmodule")


def _table() -> dict[str, tuple[set[str], str, str]]:
    out = {}
    text = (REPO / "docs" / "rules.md").read_text()
    for m in re.finditer(r"^\| `([^`]+\.yaml)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", text, re.M):
        feats = set(re.findall(r"`([a-z.]+)`", m.group(2)))
        out[m.group(1)] = (feats, m.group(3).strip(), m.group(4).strip())
    return out


def _features_used(path: str) -> set[str]:
    used: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("feature"), str):
                used.add(node["feature"].lower())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for doc in yaml.safe_load_all((REPO / path).read_text()):
        walk(doc)
    return used


def _nfd_worker(feats: features.Features) -> features.Features:
    out = features.empty()
    for kind in out:
        out[kind] = {n: fs for n, fs in feats[kind].items() if n in NFD_OWN}
    return out


def _master_view(fixture: str, output: str, tmp_path: Path) -> features.Features:
    res = run_scan(FIXTURES / fixture)  # nfd-gpu's own labels and features, no rules
    pub = Publication(res.labels, res.features)
    seen = _nfd_worker(res.features)
    if output == "nodefeature":
        obj = NodeFeatureSink(node_name="n", namespace="nfd-gpu", owner_refs=()).desired(pub)
        features.merge(seen, obj["spec"]["features"])
    else:
        d = tmp_path / f"features.d-{fixture}"
        FeatureFileSink(str(d), raw_features=True).publish(pub)
        labels, raw = parse_features_dir(str(d), dt.datetime.now(dt.timezone.utc))
        features.add_attributes(seen, "local.label", labels)
        features.add_attributes(seen, "local.feature", raw)
    return seen


def test_table_names_every_shipped_file_and_its_features() -> None:
    table = _table()
    assert set(table) == set(RULE_FILES)
    for path, (feats, local, master) in table.items():
        assert feats == _features_used(path), path
        assert local == "any output", path
        needs_nodefeature = any(f.startswith(features.OWNED_PREFIX) for f in feats)
        assert master.startswith("NodeFeature output" if needs_nodefeature else "any output")


def _out(res: Any) -> tuple[dict[str, str], list[Any]]:
    """What a rule file gives a node: labels and taints."""
    return res.labels, res.taints


@pytest.mark.parametrize("path", RULE_FILES)
def test_rules_where_the_table_says(path: str, tmp_path: Path) -> None:
    _, _, master = _table()[path]
    ruleset = load_rules(REPO / path)
    matched = False
    for fixture in ON:
        local = _out(evaluate(ruleset, run_scan(FIXTURES / fixture).features))
        matched = matched or any(local)
        via_nf = _out(evaluate(ruleset, _master_view(fixture, "nodefeature", tmp_path)))
        via_ff = _out(evaluate(ruleset, _master_view(fixture, "featurefile", tmp_path)))
        # NodeFeature mode: nfd-master computes what nfd-gpu computes (no double counts).
        assert via_nf == local, fixture
        if master.startswith("any output"):
            assert via_ff == local, fixture
        elif any(local):
            assert not any(via_ff), (fixture, via_ff)  # gpu.* flattened: never matches
    assert matched, f"{path} matches on none of {ON}: the test proves nothing"
