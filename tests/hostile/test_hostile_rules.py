"""Abusive rule files and templates: each case ends in < 5 s and < 200 MB with a one-line
error naming the file, or a rule error the agent survives, never a traceback."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from nfd_gpu.rules import RuleError, load_rules
from nfd_gpu.rules.loader import MAX_RULE_FILE
from nfd_gpu.rules.template import TemplateError, parse
from nfd_gpu.scan import run_scan
from tests.hostile.conftest import CASE_BYTES
from tests.memory import run_cli_with_peak

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"


def rule(body: str) -> str:
    return (
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\n"
        "metadata: {name: hostile}\nspec:\n  rules:\n" + body
    )


def _cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """``nfd-gpu ARGS`` in its own process, held to the case's memory bound too."""
    p, peak = run_cli_with_peak(list(args), timeout=timeout)
    assert peak < CASE_BYTES, f"nfd-gpu {' '.join(args)}: peak RSS {peak >> 20} MB"
    return p


# -- backtracking regexps ------------------------------------------------------------------

BACKTRACK = rule(
    "    - name: bt\n      labels: {x: y}\n      matchFeatures:\n"
    "        - feature: pci.device\n          matchExpressions:\n"
    '            class: {op: InRegexp, value: ["^(.|.|.)*X$"]}\n'
)


def test_backtracking_inregexp_is_linear(tmp_path: Path, bounded: None) -> None:
    f = tmp_path / "bt.yaml"
    f.write_text(BACKTRACK)
    res = run_scan(FIXTURES / "hgx-h100", rules_path=f)
    assert "x" not in res.labels


def test_backtracking_template_regex_is_linear(bounded: None) -> None:
    t = parse('{{ regexMatch "^(a+)+$" .s }}')
    assert t.execute({"s": "a" * 50_000 + "b"}) == "false"


@pytest.mark.parametrize("pattern", ["(?=x)", "(a)\\\\1", "a\\\\Z"])
def test_pattern_re2_rejects_is_a_rule_error(tmp_path: Path, pattern: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        rule(
            "    - name: bad\n      labels: {x: y}\n      matchFeatures:\n"
            "        - feature: pci.device\n          matchExpressions:\n"
            f'            class: {{op: InRegexp, value: ["{pattern}"]}}\n'
        )
    )
    with pytest.raises(RuleError) as e:
        load_rules(f)
    assert "invalid regexp" in str(e.value)


# -- templates -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "{{with 1}}" * 500 + "x" + "{{end}}" * 500,
        "{{" + "(" * 500 + "1" + ")" * 500 + "}}",
        '{{indent 1000000000 "x"}}',
        '{{printf "%01000000000d" 1}}',
        '{{printf "%.1000000000f" 1.0}}',
        '{{$s := "aaaaaaaaaa"}}{{range until 20}}{{$s = replace "a" $s $s}}{{end}}{{$s}}',
        '{{$s := "ab"}}{{range until 30}}{{$s = replace "" "xx" $s}}{{end}}',
        "{{$l := list 1}}{{range until 60}}{{$l = list $l $l}}{{end}}{{print $l}}",
        '{{$s := repeat 60000 "x"}}{{range until 10000}}{{$t := cat $s $s}}{{end}}',
        '{{$s := repeat 60000 "x"}}{{regexReplaceAll "" $s $s}}',
        '{{$s := repeat 60000 "x"}}{{regexReplaceAllLiteral "x*?" $s $s}}',
    ],
)
def test_template_bombs_are_errors(src: str, bounded: None) -> None:
    with pytest.raises(TemplateError):
        parse(src).execute({})


def test_mul_wraps_like_go_int64(bounded: None) -> None:
    src = "{{$x := 3}}{{range until 5000}}{{$x = mul $x $x 7}}{{end}}{{$x}}"
    out = parse(src).execute({})
    assert -(1 << 63) <= int(out) < (1 << 63)
    assert parse("{{mul 9223372036854775807 2}}").execute({}) == "-2"
    assert parse("{{add 9223372036854775807 1}}").execute({}) == "-9223372036854775808"


def test_one_bad_template_does_not_cost_the_other_labels(tmp_path: Path, bounded: None) -> None:
    deep = "{{with 1}}" * 500 + "a=b" + "{{end}}" * 500
    f = tmp_path / "mixed.yaml"
    f.write_text(
        rule(
            "    - name: bad\n      labelsTemplate: " + repr(deep).replace("'", '"') + "\n"
            "      matchFeatures: [{feature: pci.device, matchExpressions: "
            "{vendor: {op: Exists}}}]\n"
            "    - name: good\n      labels: {good: 'yes'}\n"
            "      matchFeatures: [{feature: pci.device, matchExpressions: "
            "{vendor: {op: Exists}}}]\n"
        )
    )
    res = run_scan(FIXTURES / "hgx-h100", rules_path=f, tolerant_rules=True)
    assert [v for k, v in res.labels.items() if k.endswith("/good") or k == "good"] == ["yes"]
    assert any("nested deeper" in w for w in res.warnings)
    assert res.complete


# -- rule files -----------------------------------------------------------------------------


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 12):
        p = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([p] * 9)}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_with_one_line(tmp_path: Path, bounded: None) -> None:
    f = tmp_path / "bomb.yaml"
    f.write_text(alias_bomb())
    p = _cli("rules", "check", str(f))
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and str(f) in err[0] and "excessive aliasing" in err[0], err
    assert "Traceback" not in p.stderr


def test_oversized_rule_file_is_refused(tmp_path: Path, bounded: None) -> None:
    f = tmp_path / "huge.yaml"
    with open(f, "w") as out:
        out.write("# padding\n" * (MAX_RULE_FILE // 10 + 1))
    with pytest.raises(RuleError) as e:
        load_rules(f)
    assert e.value.problems == [
        f"{f}: file is {f.stat().st_size} bytes, larger than the {MAX_RULE_FILE} allowed"
    ]


def test_fifo_given_to_rules_check_does_not_hang(tmp_path: Path, bounded: None) -> None:
    f = tmp_path / "rules.yaml"
    os.mkfifo(f)
    holder = threading.Thread(target=lambda: None)
    holder.start()
    p = _cli("rules", "check", str(f), timeout=10)
    assert p.returncode == 2
    assert p.stderr.strip().endswith(f"{f}: not a regular file (a FIFO)"), p.stderr


def test_deep_yaml_is_a_parse_error(tmp_path: Path, bounded: None) -> None:
    f = tmp_path / "deep.yaml"
    f.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(RuleError) as e:
        load_rules(f)
    assert str(f) in str(e.value)
