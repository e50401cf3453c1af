"""The inventory as text: ``table``, ``csv`` or ``json``.

- ``table`` is for people.
- ``csv`` has one row per product x node x health.
- ``json`` has everything, ``apiVersion: nfd-gpu/inventory-v1``.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Sequence

from nfd_gpu.inventory.report import Inventory

API_VERSION = "nfd-gpu/inventory-v1"
STALE = "stale"


def _columns(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows
    )


def table(inv: Inventory) -> str:
    """Render GPUs by product x node x health, the totals, the findings and the notes."""
    rows = [("PRODUCT", "NODE", "HEALTH", "GPUS")]
    rows += [(p, n, h, str(k)) for p, n, h, k in inv.rows()]
    out = _columns(rows) if len(rows) > 1 else "no GPUs in the agents' NodeFeatures\n"
    totals = [("PRODUCT", "HEALTH", "GPUS")] + [(p, h, str(k)) for p, h, k in inv.totals()]
    out += "\ntotals\n" + (_columns(totals) if len(totals) > 1 else "")
    health = ", ".join(f"{h} {k}" for h, k in inv.health_totals().items())
    out += f"{len(inv.gpus)} GPUs on {len(inv.nodes)} nodes" + (f" ({health})" if health else "")
    if inv.stale_gpus:
        out += f"; {len(inv.stale_gpus)} more on stale objects, not counted"
    out += "\n"
    if inv.findings:
        out += f"\ndisagreements ({len(inv.findings)})\n"
        out += _columns(
            [("KIND", "NODE", "DETAIL")] + [(f.kind, f.node, f.detail) for f in inv.findings]
        )
    for note in inv.notes:
        out += f"note: {note}\n"
    return out


def csv_text(inv: Inventory) -> str:
    """Render CSV: product,vendor,node,health,gpus,findings; stale objects' health is ``stale``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["product", "vendor", "node", "health", "gpus", "findings"])
    kinds: dict[str, list[str]] = {}
    for f in inv.findings:
        kinds.setdefault(f.node, []).append(f.kind)
    rows = Counter((g.product, g.vendor, g.node, g.health) for g in inv.gpus)
    rows.update((g.product, g.vendor, g.node, STALE) for g in inv.stale_gpus)
    for (product, vendor, node, health), n in sorted(rows.items()):
        w.writerow([product, vendor, node, health, n, ";".join(sorted(set(kinds.get(node, []))))])
    return buf.getvalue()


def document(inv: Inventory) -> dict[str, object]:
    """Return the JSON document."""
    return {
        "apiVersion": API_VERSION,
        "nodes": len(inv.nodes),
        "gpus": len(inv.gpus),
        "health": inv.health_totals(),
        "totals": [{"product": p, "health": h, "gpus": k} for p, h, k in inv.totals()],
        "rows": [{"product": p, "node": n, "health": h, "gpus": k} for p, n, h, k in inv.rows()],
        "staleGpus": len(inv.stale_gpus),
        "findings": [{"kind": f.kind, "node": f.node, "detail": f.detail} for f in inv.findings],
        "notes": list(inv.notes),
    }


def json_text(inv: Inventory) -> str:
    return json.dumps(document(inv), indent=2) + "\n"
