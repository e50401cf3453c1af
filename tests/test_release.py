"""One version source (nfd_gpu/__init__.py) and the copies that cannot read it (RELEASING.md)."""

from __future__ import annotations

import importlib.metadata
import re

from nfd_gpu import __version__
from tests.conftest import REPO


def test_version_is_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_pyproject_reads_the_version_from_the_package() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', text, re.M)
    assert not re.search(r"^version\s*=\s*\"", text, re.M)  # no literal version string
    assert 'version = { attr = "nfd_gpu.__version__" }' in text
    # The installed metadata was generated from it (stale: reinstall, pip install -e .).
    assert importlib.metadata.version("nfd-gpu") == __version__


def test_image_tags_in_manifests_and_docs_match() -> None:
    tags = set()
    for path in sorted((REPO / "deploy").rglob("kustomization.yaml")):
        tags |= set(re.findall(r"newTag:\s*v?([0-9][^\s}]*)", path.read_text()))
    for doc in ("README.md", "docs/install.md"):
        tags |= set(re.findall(r"ghcr\.io/nfd-gpu/nfd-gpu[:,]\s*(?:newTag:\s*)?v([0-9.]+)",
                               (REPO / doc).read_text()))  # fmt: skip
    assert tags == {__version__}


def test_changelog_has_the_current_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
    assert "## [Unreleased]" in text


def test_chart_version_is_the_release() -> None:
    """deploy/helm/nfd-gpu/Chart.yaml: version X.Y.Z, appVersion vX.Y.Z (RELEASING.md)."""
    import yaml

    chart = yaml.safe_load((REPO / "deploy" / "helm" / "nfd-gpu" / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (__version__, f"v{__version__}")
