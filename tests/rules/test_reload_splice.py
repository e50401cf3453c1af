"""A reload that parses only the changed text (rules/incremental.py) gives what a full parse
gives: the same rule objects, problem lines and warnings, for edits of every kind, on files
of every shape the loader accepts, over chains of edits."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.rules import incremental
from nfd_gpu.rules.loader import RuleCache, load_rule_file

HEAD = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: {n}\n"


def _rule(i: int, indent: str = "  ") -> str:
    """One rule of a few shapes, as a block list item at ``indent``."""
    shapes = [
        f"- name: r{i}\n  labels: {{example.com/r{i}: 'true'}}\n  matchFeatures:\n"
        "  - feature: gpu.node\n    matchExpressions: {family: {op: Exists}}\n",
        f'- name: "r{i}"\n  labelsTemplate: |\n    example.com/t{i}=x\n\n'
        "  matchFeatures:\n  - feature: gpu.device\n    matchExpressions:\n"
        "      vendor: {op: In, value: [nvidia,\n        amd]}\n",
        f"- name: r{i}  # a comment\n  vars: {{v{i}: 'true'}}\n"
        f"  annotations:\n    example.com/a{i}: 'multi\n      line é€😀'\n"
        "  matchFeatures:\n  - feature: rule.matched\n"
        f"    matchExpressions: {{v{i}: {{op: IsTrue}}}}\n# between rules\n\n",
        f"- name: r{i}\n  annotations:\n    example.com/k{i}: >-\n      folded\n"
        "      text\n  matchFeatures: []\n",
    ]
    text = shapes[i % len(shapes)]
    return "".join(indent + line if line.strip() and line[0] != "#" else line
                   for line in text.splitlines(keepends=True))  # fmt: skip


def _rules(n: int, start: int = 0, indent: str = "  ") -> str:
    return "".join(_rule(i, indent) for i in range(start, start + n))


BASES = {
    "indentless": HEAD.format(n="a") + "spec:\n  rules:\n" + _rules(6),
    "indented": HEAD.format(n="b") + "spec:\n  rules:\n" + _rules(5, indent="    "),
    "status after": HEAD.format(n="c") + "spec:\n  rules:\n" + _rules(5) + "status: {}\n",
    "documents": "---\n"
    + HEAD.format(n="d1")
    + "spec:\n  rules:\n"
    + _rules(3)
    + "---\nkind: Kustomization\nspec: {rules: []}\n---\n"
    + HEAD.format(n="d2")
    + "spec:\n  rules:\n"
    + _rules(3, 10)
    + "...\n",
    "list": "apiVersion: v1\nkind: List\nitems:\n- "
    + HEAD.format(n="l1").replace("\n", "\n  ").rstrip(" ")
    + "  spec:\n    rules:\n"
    + _rules(3, 0, "    ")
    + "- rules:\n"
    + _rules(3, 20, "  "),
    "bare": "rules:\n" + _rules(4, 0, ""),
    "no final newline": HEAD.format(n="e") + "spec:\n  rules:\n" + _rules(3).rstrip("\n"),
    "crlf": (HEAD.format(n="f") + "spec:\n  rules:\n" + _rules(3)).replace("\n", "\r\n"),
}

# fragments an edit inserts: rules, keys, openers and closers of every YAML construct
FRAGMENTS = [
    "  - name: new\n    labels: {example.com/new: 'y'}\n",
    "    - name: new\n      labels: {example.com/new: 'y'}\n",
    "- name: new\n",
    "  -\n    name: n2\n",
    '"',
    "'",
    "{",
    "[",
    "]",
    "}",
    "|\n",
    "|+\n",
    "  rules:\n",
    "rules: []\n",
    "status: {}\n",
    "  foo: bar\n",
    "---\n",
    "...\n",
    "#",
    "\n",
    "\n\n",
    " ",
    "    ",
    "- ",
    ": ",
    "&a ",
    "*a ",
    "%YAML 1.1\n---\n",
    "!!str ",
    "<<: {x: y}\n",
    "      extra: 1\n",
    "\t",
    "{{- if .Values.x }}\n",
]


def _edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    op = rng.randrange(7)
    i = rng.randrange(len(lines) + 1)
    if op == 0 and lines:  # delete a line
        del lines[min(i, len(lines) - 1)]
    elif op == 1 and lines:  # duplicate a line
        j = min(i, len(lines) - 1)
        lines.insert(j, lines[j])
    elif op == 2:  # insert a fragment at a line start
        lines.insert(i, rng.choice(FRAGMENTS))
    elif op == 3 and text:  # insert a fragment anywhere
        k = rng.randrange(len(text))
        return text[:k] + rng.choice(FRAGMENTS) + text[k:]
    elif op == 4 and text:  # change a character
        k = rng.randrange(len(text))
        return text[:k] + rng.choice("\"':-#{}[]|>&* x\n") + text[k + 1 :]
    elif op == 5 and text:  # a value edited in place, as a ConfigMap edit does
        return (
            text.replace("'true'", "'edited'", 1)
            if rng.random() < 0.5
            else text.replace("Exists", "DoesNotExist", 1)
        )
    else:  # move a block of lines
        if len(lines) > 2:
            j = rng.randrange(len(lines) - 1)
            k = rng.randrange(j + 1, min(len(lines), j + 8))
            block = lines[j:k]
            del lines[j:k]
            m = rng.randrange(len(lines) + 1)
            lines[m:m] = block
    return "".join(lines)


def _load(path: Path, text: str, cache: RuleCache | None) -> tuple[Any, ...]:
    path.write_bytes(text.encode())
    problems: list[str] = []
    warnings: list[str] = []
    objs = load_rule_file(path, True, problems, warnings, cache)
    return objs, problems, warnings


@pytest.mark.parametrize("name", sorted(BASES))
def test_a_spliced_reload_is_the_full_parse(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spliced = 0
    real = incremental.splice

    def counted(text: str, outline: incremental.Outline) -> incremental.Splice | None:
        nonlocal spliced
        sp = real(text, outline)
        spliced += sp is not None
        return sp

    monkeypatch.setattr(incremental, "splice", counted)
    f = tmp_path / "rules.yaml"
    rng = random.Random(name)
    for _chain in range(60):
        text = BASES[name]
        cache = RuleCache()
        got = _load(f, text, cache)
        assert got == _load(f, text, None) and not got[1], got[1]
        for _step in range(6):
            edited = _edit(text, rng)
            nxt = RuleCache(cache.fresh, None, cache.next_outline)
            got = _load(f, edited, nxt)
            want = _load(f, edited, None)
            assert got == want, (name, text, edited)
            if want[1]:  # invalid: the agent keeps the last valid version and its outline
                continue
            text, cache = edited, nxt
    assert spliced >= 40, spliced  # the splice was tried and taken, not only the full parse


def test_one_rule_edited_parses_one_rule_and_reuses_the_others(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    text = BASES["indentless"]
    cache = RuleCache()
    first, _, _ = _load(f, text, cache)
    assert cache.next_outline is not None
    nxt = RuleCache(cache.fresh, None, cache.next_outline)
    edited = text.replace("example.com/r4: 'true'", "example.com/r4: 'edited'")
    second, problems, _ = _load(f, edited, nxt)
    assert not problems and nxt.parsed == 1
    old, new = first[0].rules, second[0].rules
    assert all(new[i] is old[i] for i in range(6) if i != 4)
    assert new[4].labels == {"example.com/r4": "edited"}
    assert {id(r) for r in nxt.fresh.values()} == {id(r) for r in new}  # the old r4 is not kept


def test_a_spliced_reload_names_the_file_and_the_rule_of_a_problem(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    text = BASES["indentless"]
    cache = RuleCache()
    _load(f, text, cache)
    nxt = RuleCache(cache.fresh, None, cache.next_outline)
    bad = text.replace("{family: {op: Exists}}", "{family: {op: Bogus}}", 1)
    objs, problems, _ = _load(f, bad, nxt)
    assert len(problems) == 1 and problems[0].startswith(f"{f}: r0: matchFeatures[0]")
    assert "\n" not in problems[0] and nxt.next_outline is None
    assert [r.name for r in objs[0].rules] == ["r1", "r2", "r3", "r4", "r5"]


def test_the_agent_reload_of_one_edited_rule_parses_no_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agent/rulefiles.py hands each file's outline to its next load: a ConfigMap edit of
    one rule is not a parse of the whole file; an edit outside the rules lists is."""
    import os

    from nfd_gpu.agent.lastvalid import StaleFiles
    from nfd_gpu.agent.rulefiles import RuleFiles
    from nfd_gpu.rules import loader

    calls: list[str] = []
    real = loader.parse_documents

    def counted(text: str, source: str, *a: Any, **kw: Any) -> Any:
        calls.append(source)
        return real(text, source, *a, **kw)

    monkeypatch.setattr(loader, "parse_documents", counted)
    f = tmp_path / "r.yaml"
    files = RuleFiles(StaleFiles())

    def write(text: str) -> None:
        f.write_text(text)
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + len(calls) * 1_000_000 + 1))

    write(BASES["status after"])
    files.load(str(f))
    write(BASES["status after"].replace("example.com/r0: 'true'", "example.com/r0: 'x'"))
    got = files.load(str(f))
    assert len(calls) == 1 and got.objects[0].rules[0].labels == {"example.com/r0": "x"}
    assert got.objects == loader.load_rules(f).objects
    write(BASES["status after"].replace("status: {}", "status: {a: b}"))
    files.load(str(f))
    assert len(calls) == 3  # load_rules above, then the full parse of this edit


# Found by an adversarial review (branch splicecheck): the splice gave what a full parse
# does not, before incremental._unsafe knew every YAML line break and the byte order mark.
@pytest.mark.parametrize("brk", ["\r", "\x85", "\u2028", "\u2029"])
def test_a_tag_directive_after_another_line_break_is_a_full_parse(brk: str, tmp_path: Path) -> None:
    """YAML (libyaml) breaks lines at \\r, NEL, LS and PS too: ``%TAG`` after one is a
    directive of the document, which the middle parsed alone does not see."""
    f = tmp_path / "r.yaml"
    text = f"#{brk}%TAG !! tag:yaml.org,2002:o\n---\nrules:\n- name: a\n- name: b\n"
    cache = RuleCache()
    assert not _load(f, text, cache)[1]
    edited = text.replace("- name: b", "- name: !!str b")  # !!str is tag:yaml.org,2002:ostr
    want = _load(f, edited, None)
    assert want[1] and "ostr" in want[1][0]  # the full parse: an unknown tag
    assert _load(f, edited, RuleCache(cache.fresh, None, cache.next_outline)) == want


def test_a_file_with_a_byte_order_mark_reloads_as_its_full_parse(tmp_path: Path) -> None:
    """libyaml's mark indexes skip a leading BOM: the outline's list end is one character
    early, and the blank line it leaves out is a kept block scalar's in the full parse."""
    f = tmp_path / "r.yaml"
    text = "\ufeffrules:\n- name: x\n---\nrules:\n-  name: a\n-  name: b\n   vars: {v: q}\n\n"
    cache = RuleCache()
    assert not _load(f, text, cache)[1]
    edited = text.replace("vars: {v: q}", "vars:\n     v: |+\n       q\n")
    want = _load(f, edited, None)
    assert not want[1] and want[0][1].rules[1].vars == {"v": "q\n\n\n"}
    assert _load(f, edited, RuleCache(cache.fresh, None, cache.next_outline)) == want


def test_a_later_document_is_spliced_after_an_earlier_one_grew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an edit that grows a rule of the first document, the outline's later lists
    start where their documents now start: an edit of the second is spliced (it fell back
    to a full parse before) and still equals the full parse."""
    spliced: list[bool] = []
    real = incremental.splice

    def counted(text: str, outline: incremental.Outline) -> incremental.Splice | None:
        sp = real(text, outline)
        spliced.append(sp is not None)
        return sp

    monkeypatch.setattr(incremental, "splice", counted)
    f = tmp_path / "r.yaml"
    text = "rules:\n- name: a\n- name: b\n---\nrules:\n- name: c\n- name: d\n"
    cache = RuleCache()
    assert not _load(f, text, cache)[1]
    grown = text.replace("- name: b\n", "- name: b\n  vars: {v: longer}\n")
    nxt = RuleCache(cache.fresh, None, cache.next_outline)
    assert _load(f, grown, nxt) == _load(f, grown, None)
    edited = grown.replace("- name: d\n", "- name: d\n  vars: {w: x}\n")
    last = RuleCache(nxt.fresh, None, nxt.next_outline)
    assert _load(f, edited, last) == _load(f, edited, None)
    assert spliced == [True, True]
