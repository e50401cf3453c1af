"""The stage graph is a DAG: cli -> agent -> scan -> {discovery, labels, featuremap, rules}
-> summary -> {model, hostroot, features, tables}, checked on the source (an equivalent of an
import-linter layers contract, without the extra dependency).

A module may import modules of its own component and of any lower layer. The components
of one layer are independent of each other where the layer says so. Function-local
imports count (they are real edges), and so do imports under ``if TYPE_CHECKING:`` (a
type-only cycle is still two modules that need each other).
docs/architecture.md draws this graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "nfd_gpu"

# Highest first: (components, independent). A component is a module or a package prefix;
# the longest matching component wins.
LAYERS: list[tuple[tuple[str, ...], bool]] = [
    (("nfd_gpu.entry",), False),  # the process: signal handlers, then the command line
    (("nfd_gpu.cli",), False),
    (
        (
            "nfd_gpu.agent",  # the loop, its outputs' lifecycle, metrics and health endpoints
            "nfd_gpu.config",  # the settings, their loading, the sharing config
            "nfd_gpu.sinks",
            "nfd_gpu.inventory",  # reads the cluster through sinks/kubeclient.py
            "nfd_gpu.capture",
        ),
        False,
    ),
    (("nfd_gpu.scan", "nfd_gpu.dra"), True),  # dra: the devices DRA drivers would publish
    (("nfd_gpu.discovery", "nfd_gpu.labels", "nfd_gpu.featuremap", "nfd_gpu.rules"), True),
    (("nfd_gpu.summary",), True),  # the node summary that labels and features both read
    (
        (
            "nfd_gpu.model",
            "nfd_gpu.health",  # judging the health the model records, its signal table
            "nfd_gpu.host",  # HostRoot and the bounded reader of named files
            "nfd_gpu.features",
            "nfd_gpu.catalog",  # the model tables and the families derived without them
            "nfd_gpu.names",
            "nfd_gpu.text",
            "nfd_gpu.lazypkg",  # a third-party package registered without its __init__
            "nfd_gpu.yamllib",  # PyYAML, its import-time patterns compiled on first use
            "nfd_gpu.record",  # eq, hash and repr of frozen dataclasses, written once
            "nfd_gpu",
        ),
        False,
    ),
]

# Edges the graph still has, each with the reason it is not fixed yet. A fixed edge must
# leave this list (the test fails on stale entries), a new one must not join it lightly.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, modules: dict[str, Path], *, top_level_only: bool) -> set[str]:
    """nfd_gpu modules imported by ``path`` (``from pkg import mod`` names the module)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if top_level_only and nested:
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("nfd_gpu"))
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith("nfd_gpu"):
                base = child.module or ""
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    found.add(sub if sub in modules else base)
            visit(child, top and not nested)

    visit(tree, True)
    return found


def component(module: str) -> tuple[int, str]:
    """(layer index, component) of a module: the longest component prefix."""
    best: tuple[int, str] | None = None
    for i, (comps, _) in enumerate(LAYERS):
        for c in comps:
            inside = module.startswith(c + ".") and c != "nfd_gpu"  # nfd_gpu: __init__ only
            if (module == c or inside) and (best is None or len(c) > len(best[1])):
                best = (i, c)
    assert best is not None, f"{module} is in no layer of tests/test_layers.py"
    return best


def violations() -> set[tuple[str, str]]:
    modules = all_modules()
    bad: set[tuple[str, str]] = set()
    for name, path in modules.items():
        layer, comp = component(name)
        for target in imports(path, modules, top_level_only=False):
            t_layer, t_comp = component(target)
            if t_comp == comp or t_layer > layer:
                continue
            if t_layer == layer and not LAYERS[layer][1]:
                continue
            bad.add((name, target))
    return bad


def test_every_module_is_in_a_layer() -> None:
    for name in all_modules():
        component(name)


def test_imports_follow_the_layers() -> None:
    found = violations()
    new = sorted(found - set(KNOWN_EXCEPTIONS))
    assert not new, "imports against the layers (cli -> agent -> scan -> ...): " + ", ".join(
        f"{a} -> {b}" for a, b in new
    )
    stale = sorted(set(KNOWN_EXCEPTIONS) - found)
    assert not stale, f"fixed edges still listed in KNOWN_EXCEPTIONS: {stale}"


def test_no_import_cycle() -> None:
    """No module imports itself back, not even through function-local imports."""
    modules = all_modules()
    graph = {m: imports(p, modules, top_level_only=False) - {m} for m, p in modules.items()}
    # a package's own __init__ importing its submodules is not a cycle of the design
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if t.startswith(m + "."):
                continue
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t) :], t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_checker_sees_a_back_edge(tmp_path: Path) -> None:
    """The checker is not blind: an upward import in a scratch module is reported."""
    f = tmp_path / "probe.py"
    f.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from nfd_gpu.agent import Agent\n"
        "def f():\n    from nfd_gpu.scan import run_scan\n    from nfd_gpu import model\n"
    )
    found = imports(f, all_modules(), top_level_only=False)
    assert found == {"nfd_gpu.agent", "nfd_gpu.scan", "nfd_gpu.model"}
    assert imports(f, all_modules(), top_level_only=True) == {"nfd_gpu.agent"}
    assert component("nfd_gpu.labels.amd")[0] > component("nfd_gpu.scan")[0]
