"""Rules inside a scan: strict for the CLI, tolerant for the agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nfd_gpu.rules import RuleError, load_rules
from nfd_gpu.scan import RuleOutputs, run_scan
from tests.conftest import fixture_root

GOOD = """apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: good}
spec:
  rules:
    - name: hopper
      labels: {example.com/hopper: "true", gpu.feature.node.kubernetes.io/family: overridden}
      matchFeatures:
        - feature: gpu.node
          matchExpressions: {family: {op: In, value: [hopper]}}
"""
BAD = """apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: bad}
spec:
  rules:
    - name: broken
      labels: {example.com/x: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions: {family: {op: Bogus, value: [x]}}
"""


def write_rules(d: Path) -> Path:
    d.mkdir()
    (d / "a-good.yaml").write_text(GOOD)
    (d / "b-bad.yaml").write_text(BAD)
    return d


def test_strict_rules_raise(tmp_path: Path) -> None:
    with pytest.raises(RuleError) as e:
        run_scan(fixture_root("hgx-h100"), rules_path=write_rules(tmp_path / "r"))
    assert "b-bad.yaml" in str(e.value) and "Bogus" in str(e.value)


def test_tolerant_rules_apply_the_valid_ones(tmp_path: Path) -> None:
    r = run_scan(
        fixture_root("hgx-h100"), rules_path=write_rules(tmp_path / "r"), tolerant_rules=True
    )
    assert r.labels["example.com/hopper"] == "true"
    # Rule labels override built-in ones, as in nfd-master.
    assert r.labels["gpu.feature.node.kubernetes.io/family"] == "overridden"
    assert "example.com/x" not in r.labels
    assert any("b-bad.yaml" in w for w in r.warnings)
    assert r.rule_errors and r.rule_errors[0][0] == "load"


def test_rules_do_not_match_other_fixture(tmp_path: Path) -> None:
    r = run_scan(
        fixture_root("mi210-8x"), rules_path=write_rules(tmp_path / "r"), tolerant_rules=True
    )
    assert "example.com/hopper" not in r.labels


def test_agent_applies_rules_each_pass_and_survives_a_broken_one(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    """`nfd-gpu run --oneshot --output hook --rules DIR`: rule labels override built-ins.
    A rule file broken at start (no valid version) publishes nothing new, naming the file
    (docs/reliability.md: a restart never replaces the labels with ones built without it);
    without it, the valid rules apply."""
    import subprocess

    from tests.conftest import nfd_gpu_cmd

    rules = write_rules(tmp_path / "r")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*nfd_gpu_cmd(), "run", "--oneshot", "--output", "hook",
             "--root", str(fixture_root("hgx-h100")), "--rules", str(rules)],
            capture_output=True, text=True, env=subprocess_env, timeout=60, check=False,
        )  # fmt: skip

    p = run()
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert "b-bad.yaml" in p.stderr and "no valid version yet" in p.stderr
    (rules / "b-bad.yaml").unlink()
    p = run()
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "example.com/hopper=true" in lines
    assert "gpu.feature.node.kubernetes.io/family=overridden" in lines
    assert "gpu.feature.node.kubernetes.io/count=8" in lines


def test_rules_are_reloaded_when_a_file_changes(tmp_path: Path) -> None:
    import os

    d = tmp_path / "r"
    d.mkdir()
    f = d / "a.yaml"
    f.write_text(GOOD)
    root = fixture_root("hgx-h100")
    assert run_scan(root, rules_path=d, tolerant_rules=True).labels["example.com/hopper"] == "true"
    f.write_text(GOOD.replace('example.com/hopper: "true"', 'example.com/hopper: "yes"'))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later mtime, whatever the clock
    assert run_scan(root, rules_path=d, tolerant_rules=True).labels["example.com/hopper"] == "yes"
    (d / "b.yaml").write_text(BAD)
    r = run_scan(root, rules_path=d, tolerant_rules=True)
    assert any("b.yaml" in w for w in r.warnings)


def _counting_evaluate(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count full evaluations (run_scan imports ``evaluate`` from the engine each pass)."""
    from nfd_gpu.rules import engine

    calls: list[int] = []
    real = engine.evaluate

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "evaluate", counted)
    return calls


def test_rule_output_reused_while_features_and_rules_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_evaluate(monkeypatch)
    rules = tmp_path / "good.yaml"
    rules.write_text(GOOD)
    reuse = RuleOutputs()
    ruleset = load_rules(rules, tolerant=True)  # the agent keeps its RuleSet (rulefiles.py)
    first = run_scan(fixture_root("hgx-h100"), rules=ruleset, rule_outputs=reuse)
    again = run_scan(fixture_root("hgx-h100"), rules=ruleset, rule_outputs=reuse)
    assert len(calls) == 1  # the first pass evaluates, the unchanged second reuses
    assert again.labels == first.labels and again.labels["example.com/hopper"] == "true"
    assert again.rule_errors == first.rule_errors


def test_one_shot_scans_evaluate_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a caller's RuleOutputs nothing is kept between scans."""
    calls = _counting_evaluate(monkeypatch)
    rules = tmp_path / "good.yaml"
    rules.write_text(GOOD)
    for _ in range(2):
        assert run_scan(fixture_root("hgx-h100"), rules_path=rules).labels["example.com/hopper"]
    assert len(calls) == 2


def test_changed_features_are_evaluated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_evaluate(monkeypatch)
    rules = tmp_path / "good.yaml"
    rules.write_text(GOOD)
    reuse = RuleOutputs()
    hopper = run_scan(fixture_root("hgx-h100"), rules_path=rules, rule_outputs=reuse)
    amd = run_scan(fixture_root("mi210-8x"), rules_path=rules, rule_outputs=reuse)
    back = run_scan(fixture_root("hgx-h100"), rules_path=rules, rule_outputs=reuse)
    assert len(calls) == 3
    assert hopper.labels["example.com/hopper"] == "true" == back.labels["example.com/hopper"]
    assert "example.com/hopper" not in amd.labels


def test_changed_rules_are_evaluated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_evaluate(monkeypatch)
    rules = tmp_path / "good.yaml"
    rules.write_text(GOOD)
    reuse = RuleOutputs()
    run_scan(fixture_root("hgx-h100"), rules_path=rules, rule_outputs=reuse)
    # a new label value, same file size: the file's mtime tells the change
    rules.write_text(GOOD.replace('hopper: "true"', 'hopper: "truu"'))
    st = rules.stat()
    os.utime(rules, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    r = run_scan(fixture_root("hgx-h100"), rules_path=rules, rule_outputs=reuse)
    assert len(calls) == 2
    assert r.labels["example.com/hopper"] == "truu"


def test_two_agents_in_one_process_keep_their_own_rule_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each agent owns its reuse: passes of another agent (other features, other rules)
    between two of its own unchanged passes do not make it evaluate again."""
    from nfd_gpu.agent import Agent
    from nfd_gpu.config.loader import Config

    calls = _counting_evaluate(monkeypatch)
    agents = []
    for fixture in ("hgx-h100", "mi210-8x"):
        rules = tmp_path / f"{fixture}.yaml"
        rules.write_text(GOOD)
        out = tmp_path / fixture
        cfg = Config(root=str(fixture_root(fixture)), features_dir=str(out), rules=str(rules))
        agents.append(Agent(cfg))
    for _ in range(3):
        for agent in agents:
            assert agent.run_pass()
    assert len(calls) == 2  # each agent's first pass; every later one reuses its own
    labels = (tmp_path / "hgx-h100" / "nfd-gpu").read_text()
    assert "example.com/hopper=true" in labels


def test_rule_documents_compacted_after_parsing_are_unchanged() -> None:
    """The documents rebuilt after parsing (yamldocs.compacted, for the agent's RSS) are the
    parsed ones: every YAML type, and an alias still one shared object."""
    import datetime

    from nfd_gpu.rules.loader import parse_documents

    text = "a: &x [1, 2.5, true, null, 2024-01-02, !!binary aGk=]\nb: *x\nc: {k: v}\n---\n- 1\n"
    docs = parse_documents(text, "t.yaml", [])
    assert docs == [
        {
            "a": [1, 2.5, True, None, datetime.date(2024, 1, 2), b"hi"],
            "b": [1, 2.5, True, None, datetime.date(2024, 1, 2), b"hi"],
            "c": {"k": "v"},
        },
        [1],
    ]
    assert docs[0]["a"] is docs[0]["b"]


_YAML_CASES = [
    "a: 1\nb: [2.5, true, null, ~, 2024-01-02, 0x1f, 0o17, 1_000, 1:30, .inf, yes, 'on']\n",
    "k: !!binary aGk=\nd: !!str 12\ne: !!int '7'\nset: !!set {a, b}\n",
    "o: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
    "base: {x: 1}\nm:\n  <<: {x: 1, y: 2}\n  z: 3\n",  # a merge key: the constructor's
    "=: v\n",  # the value tag as a key
    "dup: 1\ndup: 2\n1: int-key\ntrue: bool-key\n",
    "? [a, b]\n: unhashable\n",
    "v: =\n",
    "x: !!python/name:os.system\n",
    "spec:\n  rules:\n  - name: r\n    labels: {a/b: 'true', n: 3}\n---\n---\n- [x, {y: z}]\n",
    "- !!map {a: b}\n- !!seq [1]\n- !!str\n- ''\n",
]


@pytest.mark.parametrize("text", _YAML_CASES)
def test_rule_documents_are_what_the_safe_loader_builds(text: str) -> None:
    """The documents of a file without aliases are built directly from the node graph
    (yamldocs.constructed): the same values and types as PyYAML's safe loader builds, or the
    same error."""
    import yaml

    from nfd_gpu.rules.loader import load_yaml_documents

    def typed(x: object) -> object:  # == alone would take True for 1, "1" apart from 1
        if isinstance(x, dict):
            return ("dict", [(typed(k), typed(v)) for k, v in x.items()])
        if isinstance(x, list):
            return ("list", [typed(v) for v in x])
        return (type(x).__name__, repr(x))

    try:
        want: object = typed(list(yaml.load_all(text, Loader=yaml.SafeLoader)))
    except yaml.YAMLError as e:
        want = type(e)
    try:
        got: object = typed(load_yaml_documents(text))
    except yaml.YAMLError as e:
        got = type(e)
    assert got == want


def test_rule_file_with_a_recursive_alias_is_one_error(tmp_path: Path) -> None:
    """A YAML node nested in itself (``&a [*a]``) expands without end: one error naming the
    file (it hung the loader); the tolerant agent skips the file."""
    from nfd_gpu.rules.loader import load_rules

    f = tmp_path / "loop.yaml"
    f.write_text(GOOD.replace("rules:\n", "x: &a [1, *a]\n  rules:\n", 1))
    with pytest.raises(RuleError) as e:
        load_rules(f)
    assert str(f) in str(e.value) and "recursive alias" in str(e.value)
    assert load_rules(f, tolerant=True).rule_count == 0


def test_equal_strings_in_rule_documents_are_one_object() -> None:
    from nfd_gpu.rules.loader import parse_documents

    docs = parse_documents("a: [1, &x {k: v}, *x]\nb: [k, k]\n", "t.yaml", [])
    assert docs[0]["a"][1] is docs[0]["a"][2] and docs[0]["b"] == ["k", "k"]
    assert docs[0]["b"][0] is docs[0]["b"][1]
    docs = parse_documents("a: [k, k]\nk: {k: k}\n", "t.yaml", [])  # no alias: built directly
    assert docs[0]["a"][0] is docs[0]["a"][1] is docs[0]["k"]["k"]


def test_a_rewritten_rule_file_applies_on_the_next_scan(tmp_path: Path) -> None:
    """Same size, mtime put back: the second scan still reads the new rule (no cache keyed
    on size and mtime serves the old one)."""
    f = tmp_path / "r.yaml"
    f.write_text(GOOD)
    before = os.stat(f)
    assert run_scan(fixture_root("hgx-h100"), rules_path=f).labels["example.com/hopper"] == "true"
    f.write_text(GOOD.replace('hopper: "true"', 'hopper: "nope"', 1))
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(f).st_size == before.st_size
    assert run_scan(fixture_root("hgx-h100"), rules_path=f).labels["example.com/hopper"] == "nope"


def _three_rules(b_value: str) -> str:
    head = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: r}\n"
    rule = (
        "    - name: {n}\n      labels: {{example.com/{n}: '{v}'}}\n      matchFeatures:\n"
        "        - feature: gpu.node\n          matchExpressions: {{family: {{op: Exists}}}}\n"
    )
    body = "".join(rule.format(n=n, v=b_value if n == "b" else "x") for n in "abc")
    return head + "spec:\n  rules:\n" + body


def test_a_reload_parses_only_the_rules_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ConfigMap edit rewrites the file: the rules that came back unchanged are the last
    version's (not parsed again), the changed one applies."""
    from nfd_gpu.agent.lastvalid import StaleFiles
    from nfd_gpu.agent.rulefiles import RuleFiles
    from nfd_gpu.rules import loader

    parsed: list[str] = []
    real = loader.parse_rule

    def counted(d: object, strict: bool = True) -> object:
        parsed.append(d["name"])  # type: ignore[index]
        return real(d, strict)

    monkeypatch.setattr(loader, "parse_rule", counted)
    f = tmp_path / "r.yaml"
    f.write_text(_three_rules("one"))
    files = RuleFiles(StaleFiles())
    first = files.load(str(f))
    assert parsed == ["a", "b", "c"]
    parsed.clear()
    f.write_text(_three_rules("two"))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    second = files.load(str(f))
    assert parsed == ["b"]
    old, new = first.objects[0].rules, second.objects[0].rules
    assert new[0] is old[0] and new[2] is old[2]
    assert new[1].labels == {"example.com/b": "two"}
    out = run_scan(fixture_root("hgx-h100"), rules=second)
    assert out.labels["example.com/b"] == "two" and out.labels["example.com/a"] == "x"


def test_a_file_rewritten_with_the_same_text_is_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another key of the ConfigMap edited: the kubelet rewrites every file of it (new inode,
    new mtime); one with the same text keeps its rules without being parsed."""
    from nfd_gpu.agent.lastvalid import StaleFiles
    from nfd_gpu.agent.rulefiles import RuleFiles
    from nfd_gpu.rules import loader

    calls: list[str] = []
    real = loader.parse_documents

    def counted(text: str, source: str, *a: object, **kw: object) -> object:
        calls.append(source)
        return real(text, source, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "parse_documents", counted)
    f = tmp_path / "r.yaml"
    f.write_text(_three_rules("one").replace("spec:", "{{- if true }}\nspec:"))  # a warning
    files = RuleFiles(StaleFiles())
    first = files.load(str(f))
    assert len(calls) == 1 and first.warnings
    f.unlink()
    f.write_text(_three_rules("one").replace("spec:", "{{- if true }}\nspec:"))
    again = files.load(str(f))
    assert len(calls) == 1 and again is first  # the same rule set: nothing to evaluate anew
    f.write_text(_three_rules("two"))
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert files.load(str(f)).objects[0].rules[1].labels == {"example.com/b": "two"}
    assert len(calls) == 2
