"""The inventory's join (``nfd_gpu/inventory/report.py``) and its renderings on the
simulated fleet of tests/e2e/fleet.py, without a server: the objects as the server would
return them (the Pods' uids those of the NodeFeatures' owner references). The same fleet on
the real kube-apiserver: tests/e2e/test_inventory.py."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from html.parser import HTMLParser

from nfd_gpu.inventory import render
from nfd_gpu.inventory.collect import ClusterState
from nfd_gpu.inventory.htmlpage import page
from nfd_gpu.inventory.report import build
from tests.e2e.fleet import Fleet

NS = "inventory"


def state(fleet: Fleet) -> ClusterState:
    refs = {o["metadata"]["ownerReferences"][0]["name"]: o for o in fleet.nodefeatures}
    pods = []
    for p in fleet.pods:
        uid = refs[p["metadata"]["name"]]["metadata"]["ownerReferences"][0]["uid"]
        pods.append({**p, "metadata": {**p["metadata"], "uid": uid}})
    return ClusterState(fleet.nodefeatures, fleet.nodes, pods, fleet.slices, "v1")


def test_totals_and_findings_match_the_fleet() -> None:
    fleet = Fleet.build(50, NS, "n")
    inv = build(state(fleet))
    assert Counter({(p, h): k for p, h, k in inv.totals()}) == fleet.totals
    assert {(f.kind, f.node) for f in inv.findings} == fleet.findings
    assert len(inv.stale_gpus) == fleet.stale_gpus
    assert len(inv.nodes) == 49


def test_formats_agree() -> None:
    fleet = Fleet.build(50, NS, "n")
    inv = build(state(fleet))
    doc = json.loads(render.json_text(inv))
    assert doc["gpus"] == sum(fleet.totals.values())
    assert {(t["product"], t["health"]): t["gpus"] for t in doc["totals"]} == dict(fleet.totals)
    rows = list(csv.DictReader(io.StringIO(render.csv_text(inv))))
    live = Counter()
    for r in rows:
        if r["health"] != "stale":
            live[(r["product"], r["health"])] += int(r["gpus"])
    assert live == fleet.totals
    text = render.table(inv)
    assert f"{sum(fleet.totals.values())} GPUs on 49 nodes" in text
    for kind, node in fleet.findings:
        assert any(line.split()[:2] == [kind, node] for line in text.splitlines())


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.tags: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.external += [v or "" for k, v in attrs if k in ("src", "href")]


def test_html_is_self_contained_and_escaped() -> None:
    fleet = Fleet.build(20, NS, "n")
    fleet.nodefeatures[2]["spec"]["features"]["instances"]["gpu.device"]["elements"][0][
        "attributes"
    ]["product"] = "<script>x</script>"
    parser = _Assets()
    parser.feed(page(build(state(fleet))))
    assert parser.external == []
    assert parser.tags["script"] == 0
    assert parser.tags["svg"] == 1 and parser.tags["rect"] > 0
