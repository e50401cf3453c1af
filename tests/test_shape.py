"""The shape of nfd_gpu: no module over 600 lines, no function over 80 lines.

Exceptions are the allow-list below, each with a one-line reason. An entry that no
longer exceeds its limit fails the test (so the list cannot rot): shrink the code,
then delete the entry.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "nfd_gpu"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# "path" (a module) or "path::qualified.name" (a function), relative to nfd_gpu/.
ALLOWED: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.AST]]:
    """Every function and method with its qualified name (``Class.method``, ``f.inner``)."""
    found: list[tuple[str, ast.AST]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                found.append((name, node))
            found.extend(_functions(node, name + "."))
        else:
            found.extend(_functions(node, prefix))
    return found


def oversized(package: Path) -> dict[str, int]:
    """``{entry: lines}`` for each module and function of ``package`` over its limit."""
    out: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            out[rel] = lines
        for name, node in _functions(ast.parse(text, rel)):
            assert node.end_lineno is not None
            n = node.end_lineno - node.lineno + 1  # def line to last line, docstring included
            if n > MAX_FUNCTION_LINES:
                out[f"{rel}::{name}"] = n
    return out


def test_no_module_or_function_over_its_limit() -> None:
    new = {k: n for k, n in oversized(PACKAGE).items() if k not in ALLOWED}
    assert not new, (
        f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} (function), "
        f"split it or add it to ALLOWED with a one-line reason: {new}"
    )


def test_allow_list_has_no_stale_entry() -> None:
    found = oversized(PACKAGE)
    stale = [k for k in ALLOWED if k not in found]
    assert not stale, f"no longer over the limit, delete from ALLOWED: {stale}"


def test_every_allowance_has_a_one_line_reason() -> None:
    for key, reason in ALLOWED.items():
        assert reason.strip() and "\n" not in reason, key


def test_the_check_finds_long_modules_and_nested_functions(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text(
        f"class C:\n    def long(self):\n{body.replace('    ', '        ')}\n"
        f"def outer():\n    def inner():\n{body.replace('    ', '        ')}\n"
        f"def short():\n{body[: body.index(chr(10)) + 1]}"
    )
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "ok.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert oversized(tmp_path) == {
        "big.py": MAX_MODULE_LINES + 1,
        "sub/m.py::C.long": MAX_FUNCTION_LINES + 1,
        "sub/m.py::outer": MAX_FUNCTION_LINES + 2,
        "sub/m.py::outer.inner": MAX_FUNCTION_LINES + 1,
    }
