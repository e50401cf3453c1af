"""Statements of README.md and docs/ checked against what they describe: the e2e test
count, what the pod creates on the host, the dry run's ``ownerReferences``, the resource
figures, what the image pins, the rules' regexp engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO, fixture_root, nfd_gpu_cmd

README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"
CHART = REPO / "deploy" / "helm" / "nfd-gpu"


def _text(path: Path) -> str:
    return " ".join(path.read_text().split())  # one line: statements wrap


def test_readme_e2e_count_is_the_collected_count() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/e2e"], cwd=REPO, capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    collected = re.search(r"^(\d+) tests? collected", out, re.M)
    assert collected, out[-2000:]
    said = re.search(r"\| `pytest tests/e2e` \((\d+) tests,", README)
    assert said, "README's `pytest tests/e2e` row names no test count"
    assert said.group(1) == collected.group(1)


def _created_host_paths() -> set[str]:
    """Each hostPath of a *OrCreate type under deploy/ (the chart's with its default)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    hostpath = re.compile(r"hostPath:\s*\n\s*path: (\S+(?: \S+ \}\})?)\s*\n\s*type: (\w+)")
    paths = set()
    for f in sorted((REPO / "deploy").rglob("*.yaml")):
        for path, kind in hostpath.findall(f.read_text()):
            if kind.endswith("OrCreate"):
                value = re.fullmatch(r"\{\{ \.Values\.([\w.]+) \}\}", path)
                if value:
                    node: Any = values
                    for key in value.group(1).split("."):
                        node = node[key]
                    path = node
                paths.add(path)
    return paths


def test_readme_names_what_the_pod_creates_on_the_host() -> None:
    created = _created_host_paths()
    assert created  # the featurefile output's features.d
    said = re.search(r"the one path created on the host is, with the `featurefile` output, "
                     r"NFD's `([^`]+)`", " ".join(README.split()))  # fmt: skip
    assert said, "README does not say what the pod creates on the host"
    assert created == {said.group(1)}


def test_dry_run_owner_references_are_what_it_prints() -> None:
    out = subprocess.run(
        [*nfd_gpu_cmd(), "run", "--dry-run", "--oneshot", "--output", "nodefeature", "--nvml",
         "off", "--root", str(fixture_root("hgx-h100"))],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    printed = yaml.safe_load(out)["metadata"]["ownerReferences"]
    said = re.search(r"NodeFeature YAML with `ownerReferences: ([^`]*)`",
                     _text(DOCS / "configuration.md"))  # fmt: skip
    assert said, "docs/configuration.md does not say what the dry run's ownerReferences are"
    assert yaml.safe_load(said.group(1)) == printed


def _shipped_resources() -> dict[str, dict[str, str]]:
    """The agent container's resources in deploy/base, which the chart's default repeats."""
    ds = yaml.safe_load((REPO / "deploy/base/daemonset.yaml").read_text())
    (agent,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nfd-gpu"]
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["resources"]
    assert chart == agent["resources"]
    res: dict[str, dict[str, str]] = agent["resources"]
    return res


def test_resource_figures_are_the_shipped_ones() -> None:
    r = _shipped_resources()
    req, lim = r["requests"], r["limits"]
    install = _text(DOCS / "install.md")
    assert f"requests {req['cpu']}/{req['memory']}, limits {lim['cpu']}/{lim['memory']}" in install
    assert f"at the shipped {lim['cpu']}." in install  # the start-up section
    assert f"The deployment requests {req['memory']}." in " ".join(README.split())
    row = [ln for ln in (CHART / "README.md").read_text().splitlines()
           if ln.startswith("| `resources` |")]  # fmt: skip
    assert row and f"`{json.dumps(r)}`" in row[0]
    assert f"at {lim['cpu']} (the startup probe" in row[0]


def test_image_docs_say_what_is_pinned() -> None:
    """Wheels are hash-locked; the Debian packages come from the mirror as it is then (a
    snapshot.debian.org mirror would pin them: the docs must then say so)."""
    build = (REPO / "image/build.sh").read_text()
    (mirror,) = re.findall(r"^MIRROR=\$\{MIRROR:-(\S+)\}$", build, re.M)
    image = _text(DOCS / "image.md")
    if "snapshot.debian.org" in mirror:
        raise AssertionError(f"image/build.sh now pins Debian ({mirror}): update docs/image.md")
    said = (
        "The Debian packages are not pinned: they are what the mirror"
        f" (`MIRROR`, default `{mirror}`"
    )
    assert said in image
    assert "Debian packages not pinned" in _text(DOCS / "install.md")
    assert "Debian bookworm (packages not pinned)" in " ".join(README.split())
    for lock in sorted((REPO / "image").glob("requirements-*.txt")):
        text = lock.read_text().replace("\\\n", " ")
        reqs = [ln for ln in text.splitlines() if re.match(r"^[A-Za-z0-9]", ln)]
        assert reqs, lock
        for req in reqs:
            assert "==" in req and "--hash=sha256:" in req, f"{lock.name}: {req}"


def test_rules_doc_names_the_regexp_engine_the_code_runs() -> None:
    code = (REPO / "nfd_gpu/rules/expressions.py").read_text()
    assert re.search(r"^\s+import re2\b", code, re.M) and "re2.compile(pattern" in code
    rules = _text(DOCS / "rules.md")
    assert "Regexps are RE2 syntax run by RE2 itself (google-re2, `import re2`)" in rules
    for doc in [REPO / "README.md", *sorted(DOCS.glob("*.md"))]:
        assert "Python `re`" not in _text(doc), doc.name
