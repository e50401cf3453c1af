"""Label code reads only the snapshot and its options: no file, YAML or host access inside
``nfd_gpu/labels/`` (configuration files are read by their loaders, e.g.
``nfd_gpu/config/sharing.py``; the host by discovery)."""

from __future__ import annotations

import ast
from pathlib import Path

LABELS = Path(__file__).resolve().parents[2] / "nfd_gpu" / "labels"

IO_MODULES = {"yaml", "json", "os", "io", "pathlib", "shutil", "importlib", "nfd_gpu.host"}
IO_CALLS = {"open"}
# what label code may still reach that reads files, each with its reason
ALLOWED = {
    ("intel.py", "nfd_gpu.catalog.tables"): "the built-in Intel model table (package data, cached)",
    (
        "nvidia_vfio.py",
        "nfd_gpu.catalog.tables",
    ): "the pci.ids names GFD's vfio strategy labels with (package data, cached)",
}


def io_uses(path: Path) -> set[str]:
    """Modules imported and built-in calls made by ``path`` that read files."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names = [node.func.id] if node.func.id in IO_CALLS else []
        else:
            continue
        for name in names:
            root = name.split(".")[0]
            if name in IO_CALLS or root in IO_MODULES or name in IO_MODULES:
                found.add(name)
            elif name == "nfd_gpu.catalog.tables" or name.startswith("nfd_gpu.catalog.tables."):
                found.add("nfd_gpu.catalog.tables")
    return found


def test_label_code_reads_no_files() -> None:
    found = {(p.name, use) for p in sorted(LABELS.glob("*.py")) for use in io_uses(p)} - set(
        ALLOWED
    )
    assert not found, f"file/YAML access in nfd_gpu/labels: {sorted(found)}"


def test_the_check_sees_file_reading(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import yaml\nfrom os import path\nfrom nfd_gpu.catalog import tables\n"
        "def f(p):\n    return open(p).read()\n"
    )
    assert io_uses(probe) == {"yaml", "os", "os.path", "open", "nfd_gpu.catalog.tables"}
