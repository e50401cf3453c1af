"""nfd_gpu/lazypkg.py on a package written for the test, each case in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from nfd_gpu import lazypkg
def ran():  # the packages whose __init__ ran (vars: an attribute would run it)
    return sorted(n for n in ("top", "top.inner") if vars(sys.modules.get(n, sys)).get("RAN"))
lazypkg.lazy_package("top.inner", ("probe",))  # before its parent is imported
import top  # its __init__ runs `from .inner import probe`, as urllib3's connection does
first = ran()
lazypkg.attach("top.inner")
probe = top.inner.probe.VALUE
second = ran()
later = top.inner.helper()  # anything else: the __init__ runs, once
print(json.dumps({"first": first, "probe": probe, "second": second, "later": later,
                  "third": ran()}))
"""


def test_a_subpackage_registered_before_its_parent(tmp_path: Path) -> None:
    inner = tmp_path / "top" / "inner"
    inner.mkdir(parents=True)
    (tmp_path / "top" / "__init__.py").write_text("RAN = 1\nfrom .inner import probe\n")
    (inner / "__init__.py").write_text("RAN = 1\ndef helper():\n    return 'helped'\n")
    (inner / "probe.py").write_text("VALUE = 42\n")
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], cwd=repo,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["first"] == ["top"]  # the parent ran; the subpackage's __init__ did not
    assert got["probe"] == 42 and got["second"] == ["top"]
    assert got["later"] == "helped" and got["third"] == ["top", "top.inner"]
