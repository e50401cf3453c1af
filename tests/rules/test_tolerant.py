"""Tolerant loading for the agent: one broken file or rule does not block the others."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nfd_gpu.cli.rules import rules_app
from nfd_gpu.rules import RuleError, evaluate, load_rules
from nfd_gpu.scan import run_scan
from tests.rules.conftest import DATA, FIXTURES, REPO

G = "gpu.feature.node.kubernetes.io/"

MIXED = """\
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: mixed}
spec:
  rules:
    - name: good-before
      labels: {example.com/before: "true"}
    - name: bad-op
      labels: {example.com/bad: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            vendor: {op: Equals, value: [nvidia]}
    - name: good-after
      labels: {example.com/after: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            vendor: {op: In, value: [nvidia]}
"""


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rules.d"
    d.mkdir()
    for f in (REPO / "rules").glob("*.yaml"):
        shutil.copy(f, d / f.name)
    (d / "10-mixed.yaml").write_text(MIXED)
    shutil.copy(DATA / "broken" / "yaml-syntax.yaml", d / "20-yaml-syntax.yaml")
    shutil.copy(DATA / "broken" / "bad-api-version.yaml", d / "30-bad-api-version.yaml")
    return d


def test_strict_default_raises_with_every_problem(rules_dir: Path) -> None:
    with pytest.raises(RuleError) as exc:
        load_rules(rules_dir)
    problems = exc.value.problems
    assert len(problems) == 3
    assert problems[0].startswith(f"{rules_dir / '10-mixed.yaml'}: bad-op: ")
    assert "unknown operator 'Equals'" in problems[0]
    assert problems[1].startswith(f"{rules_dir / '20-yaml-syntax.yaml'}: cannot parse YAML")
    assert problems[2].startswith(f"{rules_dir / '30-bad-api-version.yaml'}: ")


def test_tolerant_keeps_valid_rules_and_lists_problems(rules_dir: Path) -> None:
    rs = load_rules(rules_dir, tolerant=True)
    with pytest.raises(RuleError) as exc:
        load_rules(rules_dir)
    assert list(rs.problems) == exc.value.problems  # the same lines, not raised
    names = [r.name for o in rs.objects for r in o.rules]
    assert "bad-op" not in names
    assert {"good-before", "good-after", "gpu-class-large", "mig-ready"} <= set(names)

    out = evaluate(rs, run_scan(FIXTURES / "hgx-h100").features)
    assert out.errors == []
    assert out.labels == {
        "example.com/before": "true",
        "example.com/after": "true",
        G + "class": "large",
        G + "mig-ready": "true",
    }


def test_tolerant_missing_path_is_a_problem(tmp_path: Path) -> None:
    rs = load_rules(tmp_path / "nope", tolerant=True)
    assert rs.objects == ()
    assert rs.problems == (f"{tmp_path / 'nope'}: no such file or directory",)


def test_tolerant_clean_directory_has_no_problems() -> None:
    rs = load_rules(REPO / "rules", tolerant=True)
    assert rs.problems == ()
    assert rs.rule_count == load_rules(REPO / "rules").rule_count


def test_cli_check_and_test_stay_strict(rules_dir: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(rules_app, ["check", str(rules_dir)])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 3
    res = runner.invoke(rules_app, ["test", str(rules_dir), "--root", str(FIXTURES / "hgx-h100")])
    assert res.exit_code == 2


REGEXP_RULES = """\
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: regexp}
spec:
  rules:
    - name: by-regexp
      labels: {example.com/regexp: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            vendor: {op: InRegexp, value: ["^nvi"]}
    - name: plain
      labels: {example.com/plain: "true"}
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            vendor: {op: In, value: [nvidia]}
"""


@pytest.mark.parametrize("command", ["run", "scan"])
def test_rule_whose_regexp_engine_cannot_load_is_that_rules_error(
    tmp_path: Path, subprocess_env: dict[str, str], command: str
) -> None:
    """`import re2` failing (an image without google-re2) drops the regexp rule with a
    warning naming file and rule (the agent), or is a one-line error (`scan`, strict):
    never a traceback or a failed scan."""
    import subprocess

    from tests.conftest import nfd_gpu_cmd

    block = tmp_path / "block"
    block.mkdir()
    (block / "re2.py").write_text('raise ImportError("no RE2 here")\n')
    rules = tmp_path / "regexp.yaml"
    rules.write_text(REGEXP_RULES)
    env = dict(subprocess_env, PYTHONPATH=f"{block}:{subprocess_env['PYTHONPATH']}")
    args = ["--oneshot", "--output", "hook"] if command == "run" else []
    root = str(FIXTURES / "hgx-h100")
    p = subprocess.run(
        [*nfd_gpu_cmd(), command, *args, "--root", root, "--rules", str(rules)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    assert "regexp engine unavailable (google-re2: no RE2 here)" in p.stderr, p.stderr
    assert f"{rules}: by-regexp: " in p.stderr, p.stderr
    if command == "run":
        assert p.returncode == 0, p.stderr
        assert "example.com/plain=true" in p.stdout.splitlines()
        assert "example.com/regexp=true" not in p.stdout
    else:
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
