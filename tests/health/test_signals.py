"""One owner of health reasons: the signal table (nfd_gpu/health/signals.py).

Every reason a reader can emit is a row; a reason that is not judged ``failed`` (never
dropped to ``ok``); the severities, docs/health.md's table and the metric's reason values
are made of the table."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from nfd_gpu.health import SEVERITY, HealthOptions, HealthTracker, judge
from nfd_gpu.health import signals as health_signals
from nfd_gpu.health.signals import BY_REASON, SIGNALS
from nfd_gpu.model import Gpu, Health, HealthReason, Snapshot
from nfd_gpu.scan import run_scan
from tests.conftest import TESTS, fixture_root

PACKAGE = TESTS.parent / "nfd_gpu"
G = "gpu.feature.node.kubernetes.io"


def _reader_reasons() -> dict[str, str]:
    """Every reason literal the readers build: ``HealthReason("...")``, ``.fault("...")``,
    and the reason strings of the tables they loop over (``(bit, "reason")`` rows)."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "health_signals.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in ("HealthReason", "fault"):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found[first.value] = f"{path.name}:{node.lineno}"
        # loops over literal rows whose item becomes a HealthReason's reason
        for node in ast.walk(tree):
            loops: list[ast.For | ast.comprehension] = []
            if isinstance(node, ast.For):
                loops.append(node)
            if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
                loops += [gen for gen in node.generators]
            for loop in loops:
                if not isinstance(loop.iter, ast.Tuple):
                    continue
                body = node
                for where, row in _loop_reasons(loop, body):
                    found[row] = f"{path.name}:{getattr(node, 'lineno', 0)}:{where}"
        # tables of (key, reason) rows the readers turn into faults
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Tuple):
                first = node.targets[0] if isinstance(node, ast.Assign) else node.target
                target = getattr(first, "id", "")
                if target in ("CLOCK_EVENTS", "AER_FILES", "PORT_AER_FILES"):
                    for row in node.value.elts:
                        assert isinstance(row, ast.Tuple)
                        last = row.elts[-1]
                        assert isinstance(last, ast.Constant)
                        found[last.value] = f"{path.name}:{target}"
    return found


def _loop_reasons(loop: ast.For | ast.comprehension, body: ast.AST) -> list[tuple[str, str]]:
    """``for a, b in (("x", n), ...)``: the rows' items bound to the name a HealthReason
    in the loop's body takes as its reason."""
    names = [getattr(t, "id", None) for t in getattr(loop.target, "elts", [loop.target])]
    used = {
        c.args[0].id
        for c in ast.walk(body)
        if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "HealthReason"
        and c.args and isinstance(c.args[0], ast.Name)
    }  # fmt: skip
    out = []
    for row in loop.iter.elts:  # type: ignore[attr-defined]
        items = row.elts if isinstance(row, ast.Tuple) else [row]
        for name, item in zip(names, items, strict=False):
            if name in used and isinstance(item, ast.Constant):
                out.append((str(name), str(item.value)))
    return out


def test_every_reason_a_reader_builds_is_in_the_table() -> None:
    found = _reader_reasons()
    assert len(found) >= 18  # the scan reached the readers
    missing = {r: where for r, where in found.items() if r not in BY_REASON}
    assert not missing, f"reasons not in nfd_gpu/health/signals.py: {missing}"
    # and no row nobody emits (``lost``: the tracker's lost GPUs, not a reader's reason)
    assert set(BY_REASON) - set(found) == {"lost"}


def test_every_reason_read_on_the_fault_fixtures_is_in_the_table() -> None:
    seen: set[str] = set()
    for name in ("h100-aer-fatal", "h100-remap-failure", "h100-thermal-slowdown", "mi210-ras-ue",
                 "h100-nvlink-down", "h100-no-driver", "h100-gpu-lost", "max1550-xe"):  # fmt: skip
        for g in run_scan(fixture_root(name)).snapshot.gpus:
            seen |= {r.reason for r in g.health.reasons}
    assert seen and seen <= set(BY_REASON), seen - set(BY_REASON)


def test_a_reason_missing_from_the_table_fails_the_gpu() -> None:
    """Never silently ``ok``: on main such a reason was dropped and the GPU read ``ok``."""
    h = Health(reasons=(HealthReason("new-fault", "nvml"),), signals=("nvml.device",))
    assert judge(h, HealthOptions()).state == "failed"


def test_severity_ranking_is_the_table() -> None:
    assert {s.reason: s.severity for s in SIGNALS} == SEVERITY
    assert len(BY_REASON) == len(SIGNALS)  # one row per reason
    for s in SIGNALS:
        assert s.severity in ("failed", "degraded", "no-driver"), s
        assert s.threshold in ("", "health_uncorrectable", "health_correctable",
                               "health_nonfatal_xids"), s  # fmt: skip
        assert s.meaning and s.action and s.read, s


def test_metric_reason_values_are_the_table_and_bounded() -> None:
    assert health_signals.metric_reason("xid", 48) == "xid-48"
    assert health_signals.metric_reason("xid", 99999) == "xid-other"
    # a GPU's reasons in the metric are always among them
    t = HealthTracker()
    t.watching = True
    for code in range(1000, 1100):
        t.add_xid("0000:01:00.0", code)
    g = Gpu("0000:01:00.0", "nvidia", "10de", "2330", "030200",
            health=Health(signals=("nvml.device",)))  # fmt: skip
    out = t.apply(Snapshot(root="/", gpus=(g,)))
    from nfd_gpu.summary import reason_names

    assert reason_names(out.gpus[0]) == ["xid-other"]


def _docs_script() -> ModuleType:
    scripts = TESTS.parent / "scripts"
    if str(scripts) not in sys.path:
        sys.path.insert(0, str(scripts))
    spec = importlib.util.spec_from_file_location("health_docs", scripts / "health_docs.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["health_docs"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_docs_health_md_table_is_generated_from_the_table() -> None:
    gen = _docs_script()
    doc = Path(gen.DOC).read_text("utf-8")
    assert doc == gen.render(doc), "run: python scripts/health_docs.py"
    for s in SIGNALS:
        assert f"| `{s.reason}` |" in doc
