"""nfd_gpu/yamllib.py: PyYAML's import-time patterns compiled on first use, the same results.

Each check runs in a fresh interpreter, where PyYAML is not imported yet.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Scalars of every kind PyYAML's resolvers and constructors tell apart, and text the
# reader's class refuses (a C0 control, U+FFFE, an unpaired surrogate's neighbourhood)
SAMPLES = ["yes", "No", "off", "1.5", "-.inf", ".NaN", "1e3", "6.8523015e+5", "0x1f", "0b101",
           "0o17", "017", "190:20:30", "-1_000", "~", "null", "", "2001-12-14",
           "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "<<", "=", "!", "&", "*",
           "abc", "a\x01b", "tab\there", "\ufffe", "\x85", "é€😀"]  # fmt: skip

DOCUMENT = """\
a: 2001-12-14
b: yes
c: 0x1f
d: ~
e: 1.5e3
f: [1, 2.5, .inf, "str", !!str 12]
g: &anchor {x: 1}
h: *anchor
i: {<<: *anchor, y: 2}
j: 2001-12-14t21:59:43.10-05:00
"""


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_every_deferred_pattern_matches_as_the_compiled_one() -> None:
    code = f"""
import json, re, sys
compile_before = re.compile
from nfd_gpu.yamllib import DeferredPattern, yaml
assert re.compile is compile_before, "re.compile not restored"
found = []
for name, mod in list(sys.modules.items()):
    if name == "yaml" or name.startswith("yaml."):
        for value in vars(mod).values():
            items = list(vars(value).values()) if isinstance(value, type) else [value]
            found += [v for v in items if isinstance(v, DeferredPattern)]
for resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.values():
    found += [r for _, r in resolvers if isinstance(r, DeferredPattern)]
samples = {SAMPLES!r}
rows = []
for d in {{id(p): p for p in found}}.values():
    real = re.compile(*d._args)
    rows.append([d.pattern == real.pattern, d.flags == real.flags,
                 [[bool(d.match(s)) == bool(real.match(s)),
                   (m.span() if (m := d.search(s)) else None)
                   == (r.span() if (r := real.search(s)) else None)] for s in samples]])
print(json.dumps({{"n": len(rows), "rows": rows,
                  "reader": str(yaml.reader.Reader.NON_PRINTABLE.pattern)}}))
"""
    got = json.loads(_python(code))
    # the reader's class, the constructor's timestamp, the resolvers' patterns
    assert got["n"] >= 10, got["n"]
    for same_pattern, same_flags, per_sample in got["rows"]:
        assert same_pattern and same_flags
        assert all(a and b for a, b in per_sample)
    assert got["reader"].startswith("[^")


def test_the_loader_never_compiles_the_readers_class_and_parses_as_plain_pyyaml() -> None:
    code = f"""
import json
from nfd_gpu.yamllib import yaml
from nfd_gpu.rules import load_rules
from nfd_gpu.rules.yamldocs import load_yaml_documents
load_rules("rules")
docs = load_yaml_documents({DOCUMENT!r})
print(json.dumps({{"compiled": yaml.reader.Reader.NON_PRINTABLE._compiled is not None,
                  "docs": repr(docs), "safe_load": repr(yaml.safe_load({DOCUMENT!r}))}}))
"""
    got = json.loads(_python(code))
    assert got["compiled"] is False  # what the deferral saves: libyaml never runs the reader
    plain = _python(f"import yaml; print(repr(yaml.safe_load({DOCUMENT!r})))").strip()
    assert got["safe_load"] == plain
    assert got["docs"] == f"[{plain}]"
    # the pure-Python loader still refuses what the reader's class refuses
    err = _python(
        "from nfd_gpu.yamllib import yaml\n"
        "try:\n    yaml.load('a: \\x01', Loader=yaml.SafeLoader)\n"
        "except yaml.reader.ReaderError as e:\n    print('refused', e.character)\n"
    )
    assert err.split() == ["refused", "1"]  # the code point of \x01


def test_pyyaml_imported_first_is_used_as_it_is() -> None:
    out = _python(
        "import re, yaml\nfrom nfd_gpu.yamllib import yaml as ours\n"
        "print(ours is yaml, isinstance(yaml.reader.Reader.NON_PRINTABLE, re.Pattern))"
    )
    assert out.split() == ["True", "True"]


def test_the_package_imports_pyyaml_only_through_yamllib() -> None:
    direct = re.compile(r"^\s*(import yaml\b|from yaml\b)", re.M)
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "nfd_gpu").rglob("*.py"))
        if p.name != "yamllib.py" and direct.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_a_deferred_pattern_compiles_once_keeps_what_it_read_copies_and_pickles() -> None:
    import copy
    import pickle

    from nfd_gpu.yamllib import DeferredPattern

    p = DeferredPattern(r"a(b+)", re.I)
    assert p._compiled is None and "not compiled yet" in repr(p)
    m = p.match("ABBc")
    assert m is not None and m.group(1) == "BB"
    assert vars(p)["match"] == re.compile(r"a(b+)", re.I).match  # the bound method, kept
    assert p.compiled() is p.compiled() and p.pattern == r"a(b+)" and p.flags & re.I
    assert copy.copy(p) is p and copy.deepcopy({"k": p})["k"] is p
    back = pickle.loads(pickle.dumps(p))
    assert isinstance(back, re.Pattern) and back.pattern == p.pattern and back.flags == p.flags
    fresh = DeferredPattern("x")
    assert copy.copy(fresh) is fresh and fresh._compiled is None  # a copy compiles nothing
    try:
        fresh._missing  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("a private name must not be looked up on the compiled pattern")
