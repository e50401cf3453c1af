"""docs/labels.md is generated from the code's label table; every emitted key is documented."""

from __future__ import annotations

import pytest

from nfd_gpu.labels import registry
from nfd_gpu.labels.neutral import NAMESPACE, documented, render_docs
from nfd_gpu.labels.profile import Profile
from nfd_gpu.scan import run_scan
from tests.conftest import ALL_FIXTURES, REPO, fixture_root


def test_labels_doc_is_generated() -> None:
    assert (REPO / "docs/labels.md").read_text() == render_docs(), (
        "docs/labels.md is stale: run `python -m nfd_gpu.labels.neutral > docs/labels.md`"
    )


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_neutral_label_is_documented(name: str) -> None:
    for key in run_scan(fixture_root(name)).labels:
        ns, _, short = key.partition("/")
        assert ns == NAMESPACE
        assert documented(short), key


def test_readme_commands_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert "nfd-gpu scan --root tests/fixtures/sysfs/hgx-h100" in readme
    assert "\nbash .ci/run\n" in readme  # the test command: all set-up, then the tests
    ci = (REPO / ".ci/run").read_text()
    assert ci.rstrip().endswith("bash scripts/test.sh")


def test_amd_labels_doc_is_generated() -> None:
    from nfd_gpu.labels import amd

    assert (REPO / "docs/labels-amd.md").read_text() == amd.render_docs(), (
        "docs/labels-amd.md is stale: run `python -m nfd_gpu.labels.amd > docs/labels-amd.md`"
    )


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_amd_label_is_documented(name: str) -> None:
    from nfd_gpu.labels import amd

    for key in run_scan(fixture_root(name), profiles=("amd",)).labels:
        assert key.startswith("amd.com/"), key
        assert amd.documented(key), key


def test_nvidia_doc_covers_the_options() -> None:
    doc = (REPO / "docs/nvidia.md").read_text()
    for needle in (
        "--mig-strategy",
        "NFD_GPU_MIG_STRATEGY",
        "--sharing-config",
        "MIG-INVALID",
        "nfd-gpu snapshot",
        "nvml.json",
        "most numerous model",
        "The default is `none`, GFD's",
    ):
        assert needle in doc, needle
    assert "docs/nvidia.md" in (REPO / "README.md").read_text()


DOCUMENTED = [p for p in registry.PROFILES.values() if p.docs is not None]


@pytest.mark.parametrize("profile", DOCUMENTED, ids=lambda p: p.name)
def test_every_registered_profile_page_is_generated(profile: Profile) -> None:
    assert profile.docs is not None
    module = f"nfd_gpu.labels.{profile.name}"
    assert (REPO / profile.docs).read_text() == profile.render_docs(), (
        f"{profile.docs} is stale: run `python -m {module} > {profile.docs}`"
    )


def test_profiles_without_a_generated_page() -> None:
    # nvidia follows GFD's labels, documented by hand in docs/nvidia.md
    assert [p.name for p in registry.PROFILES.values() if p.docs is None] == ["nvidia"]
    with pytest.raises(ValueError, match="no generated docs page"):
        registry.PROFILES["nvidia"].render_docs()
