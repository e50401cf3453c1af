"""Measure docstring style: sentence length, parentheses, one-line summaries.

Prints, for the package (and any Go trees given):

- docstrings counted;
- mean words per sentence;
- parentheses per 100 words (opening ones counted);
- share of docstrings whose first line is a one-line summary ending with a period;
- the 15 worst modules by words per sentence (package only).

Sentence rule, the same for Python and Go:

- a sentence ends at `.`, `!` or `?` followed by a space or the end of the text;
- a line ending with `:` ends one too (it introduces a list);
- a blank line ends one, and each list item (`-`, `*`, `1.`) starts one;
- the indented block under a `::` line, and a `>>>` session up to a blank line, are code
  and are skipped;
- inline code (`x` or ``x``) counts as one word, and its parentheses are not counted.

A word is a whitespace-separated token holding a letter or digit.
Python: module, class and function docstrings, read with ast.
Go: the `//` comment block right above a top-level `package`, `func`, `type`, `var`
or `const` line, in non-test, non-generated files.

    python scripts/docstyle.py                       # the package
    python scripts/docstyle.py --by-package          # plus one row per subpackage
    python scripts/docstyle.py --package /tmp/old/nfd_gpu   # another checkout's package
    python scripts/docstyle.py --go NFD=NFD_CLONE::source --go GFD=GFD_CLONE::internal/lm

A `--go` path is a directory of Go files, or `GITDIR::SUBDIR` to read a bare clone's HEAD.
NFD_CLONE is a clone of kubernetes-sigs/node-feature-discovery, GFD_CLONE one of
NVIDIA/k8s-device-plugin (gpu-feature-discovery's home).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nfd_gpu"

_END = re.compile(r"[.!?](?=\s|$)")
_ITEM = re.compile(r"^\s*(?:[-*]|\d+[.)])\s+")
_WORD = re.compile(r"[A-Za-z0-9]")
_GO_DECL = re.compile(r"^(?:package|func|type|var|const)\b")


@dataclass
class Tally:
    """Counts over a set of doc texts."""

    docs: int = 0
    words: int = 0
    sentences: int = 0
    parens: int = 0
    summaries: int = 0
    per_module: dict[str, list[int]] = field(default_factory=dict)

    def add(self, text: str, module: str = "") -> None:
        """Count one doc text."""
        words, sentences = measure(text)
        self.docs += 1
        self.words += words
        self.sentences += sentences
        self.parens += prose(text).count("(")
        self.summaries += summary_line(text)
        row = self.per_module.setdefault(module, [0, 0])
        row[0] += words
        row[1] += sentences

    def row(self, name: str) -> str:
        """One table row: name, docs, words/sentence, parens/100 words, summary share."""
        wps = self.words / self.sentences if self.sentences else 0.0
        par = 100 * self.parens / self.words if self.words else 0.0
        share = 100 * self.summaries / self.docs if self.docs else 0.0
        return f"{name:<28} {self.docs:>6} {wps:>10.1f} {par:>12.2f} {share:>9.0f}%"


def prose(text: str) -> str:
    """Return the text less its code blocks and inline code.

    A code block is the indented block after a line ending with `::`,
    or a `>>>` session up to the next blank line.
    """
    out: list[str] = []
    block_indent: int | None = None  # in a `::` block: lines indented deeper are code
    colons_indent: int | None = None  # the last text line ended with `::`, at this indent
    doctest = False
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if doctest:
            if stripped:
                continue
            doctest = False
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if colons_indent is not None and stripped:
            deeper = indent > colons_indent
            block_indent = colons_indent if deeper else None
            colons_indent = None
            if deeper:
                continue
        if stripped.startswith(">>>"):
            doctest = True
            continue
        out.append(line)
        if line.rstrip().endswith("::"):
            colons_indent = indent
    joined = re.sub(r"``[^`]*``", "code", "\n".join(out))
    return re.sub(r"`[^`\n]*`", "code", joined)


def measure(text: str) -> tuple[int, int]:
    """Return (words, sentences) of a doc text by the rule above."""
    sentences = 0
    words = 0
    open_words = 0
    for line in prose(text).splitlines():
        if not line.strip() or _ITEM.match(line):
            if open_words:
                sentences += 1
            open_words = 0
            if not line.strip():
                continue
            line = _ITEM.sub("", line)
        for token in line.split():
            if not _WORD.search(token):
                continue
            words += 1
            open_words += 1
            if _END.search(token + " "):
                sentences += 1
                open_words = 0
        if open_words and line.rstrip().endswith(":"):
            sentences += 1
            open_words = 0
    if open_words:
        sentences += 1
    return words, sentences


def summary_line(text: str) -> bool:
    """Whether the first line is a whole one-line summary ending with a period."""
    lines = text.strip().splitlines()
    if not lines or not lines[0].rstrip().endswith("."):
        return False
    return len(lines) == 1 or not lines[1].strip()


def docstrings(path: Path) -> list[str]:
    """The module, class and function docstrings of one Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes: list[ast.AST] = [tree]
    nodes += [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    found = [ast.get_docstring(n) for n in nodes]  # type: ignore[arg-type]
    return [doc for doc in found if doc]


def python_tally(package: Path) -> tuple[Tally, dict[str, Tally]]:
    """Tally the package's docstrings, in total and per subpackage."""
    total = Tally()
    subs: dict[str, Tally] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        module = ".".join(rel.with_suffix("").parts)
        parts = rel.parts
        sub = parts[1] if len(parts) > 2 else "(top-level modules)"
        for doc in docstrings(path):
            total.add(doc, module)
            subs.setdefault(sub, Tally()).add(doc, module)
    return total, subs


def go_sources(spec: str) -> list[tuple[str, str]]:
    """(name, text) of the Go files of a directory or of `GITDIR::SUBDIR` at HEAD."""
    if "::" in spec:
        gitdir, sub = spec.split("::", 1)
        names = subprocess.run(
            ["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", "HEAD", "--", sub],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        out = []
        for name in names:
            if name.endswith(".go"):
                blob = subprocess.run(
                    ["git", "--git-dir", gitdir, "show", f"HEAD:{name}"],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                out.append((name, blob))
        return out
    return [(str(p), p.read_text(encoding="utf-8")) for p in sorted(Path(spec).rglob("*.go"))]


def go_docs(text: str) -> list[str]:
    """The `//` doc comments right above top-level declarations."""
    docs: list[str] = []
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("//"):
            body = line[2:]
            if body.startswith("go:") or body.startswith(" +"):
                block = []
                continue
            block.append(body[1:] if body.startswith(" ") else body)
            continue
        if block and _GO_DECL.match(line):
            docs.append("\n".join(block))
        block = []
    return docs


def go_tally(spec: str) -> Tally:
    """Tally the doc comments of one Go tree."""
    tally = Tally()
    for name, text in go_sources(spec):
        if name.endswith("_test.go") or "/vendor/" in name or "Code generated" in text[:500]:
            continue
        for doc in go_docs(text):
            tally.add(doc, name)
    return tally


def main(argv: list[str] | None = None) -> int:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by-package", action="store_true", help="one row per subpackage")
    parser.add_argument("--go", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--worst", type=int, default=15, help="worst modules listed")
    parser.add_argument("--package", type=Path, default=PACKAGE, help="another nfd_gpu tree")
    args = parser.parse_args(argv)
    total, subs = python_tally(args.package)
    print(f"{'':<28} {'docs':>6} {'words/sent':>10} {'parens/100w':>12} {'summary':>10}")
    print(total.row("nfd_gpu"))
    for spec in args.go:
        label, _, path = spec.partition("=")
        print(go_tally(path).row(label))
    if args.by_package:
        print()
        for name in sorted(subs):
            print(subs[name].row(name))
    print(f"\nworst {args.worst} modules by words per sentence:")
    ranked = sorted(
        ((w / s if s else 0.0, m, w) for m, (w, s) in total.per_module.items()),
        reverse=True,
    )
    for wps, module, words in ranked[: args.worst]:
        print(f"  {wps:5.1f}  {module}  ({words} words)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
