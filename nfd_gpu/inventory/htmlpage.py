"""The inventory as one self-contained HTML file.

- Inline CSS, and an inline SVG bar chart of GPUs per product and health.
- No script, no external asset; every value escaped.
"""

from __future__ import annotations

from collections import Counter
from html import escape

from nfd_gpu.inventory.report import Inventory
from nfd_gpu.model import HEALTH_STATES

COLOURS = {"ok": "#2e7d32", "degraded": "#f9a825", "failed": "#c62828", "unknown": "#9e9e9e"}
BAR, GAP, LABEL_W, CHART_W = 22, 8, 260, 440

STYLE = """body{font-family:sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.2em .6em;
text-align:left}th{background:#eee}.failed{color:#c62828}.finding{background:#fff3e0}"""


def _order(health: str) -> int:
    return HEALTH_STATES.index(health) if health in HEALTH_STATES else len(HEALTH_STATES)


def chart(inv: Inventory) -> str:
    """Stacked horizontal bars: one per product, a segment per health state."""
    per: dict[str, Counter[str]] = {}
    for g in inv.gpus:
        per.setdefault(g.product, Counter())[g.health] += 1
    products = sorted(per, key=lambda p: (-sum(per[p].values()), p))
    most = max((sum(c.values()) for c in per.values()), default=1)
    height = len(products) * (BAR + GAP) + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="chart" width="{LABEL_W + CHART_W + 60}" '
        f'height="{height}" role="img" aria-label="GPUs per product and health">'
    ]
    for i, product in enumerate(products):
        y = i * (BAR + GAP)
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{y + BAR - 6}" text-anchor="end" '
            f'font-size="12">{escape(product)}</text>'
        )
        x = float(LABEL_W)
        for health in sorted(per[product], key=_order):
            n = per[product][health]
            w = CHART_W * n / most
            colour = COLOURS.get(health, "#607d8b")
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR}" fill="{colour}" '
                f'data-product="{escape(product)}" data-health="{escape(health)}" '
                f'data-gpus="{n}"><title>{escape(product)}: {n} {escape(health)}</title></rect>'
            )
            x += w
        parts.append(
            f'<text x="{x + 4:.1f}" y="{y + BAR - 6}" font-size="12">'
            f"{sum(per[product].values())}</text>"
        )
    legend_y = len(products) * (BAR + GAP) + 20
    for j, (health, colour) in enumerate(COLOURS.items()):
        lx = LABEL_W + j * 100
        parts.append(f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 16}" y="{legend_y}" font-size="12">{health}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(head: tuple[str, ...], rows: list[tuple[object, ...]], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append(f"<tr{attr}>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


def page(inv: Inventory) -> str:
    """Return the whole HTML document."""
    health = ", ".join(f"{k} {escape(h)}" for h, k in inv.health_totals().items())
    summary = f"{len(inv.gpus)} GPUs on {len(inv.nodes)} nodes" + (f" ({health})" if health else "")
    if inv.stale_gpus:
        summary += f"; {len(inv.stale_gpus)} more on stale objects, not counted"
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>nfd-gpu inventory</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>nfd-gpu inventory</h1>",
        f'<p id="summary">{summary}</p>',
        "<h2>GPUs per product and health</h2>",
        chart(inv),
        "<h2>Totals</h2>",
        _table(("product", "health", "GPUs"), list(inv.totals())),
        f'<h2 id="findings">Disagreements ({len(inv.findings)})</h2>',
        _table(
            ("kind", "node", "detail"),
            [(f.kind, f.node, f.detail) for f in inv.findings],
            "finding",
        ),
        "<h2>GPUs by product, node and health</h2>",
        _table(("product", "node", "health", "GPUs"), list(inv.rows())),
    ]
    body += [f'<p class="note">note: {escape(n)}</p>' for n in inv.notes]
    body.append("</body></html>\n")
    return "\n".join(body)
