"""docs/labels*.md are generated from the profiles' label tables; every emitted key is
documented."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nfd_gpu.config.sharing import load_sharing_config
from nfd_gpu.labels import nvidia, registry
from nfd_gpu.labels.neutral import NAMESPACE, documented, render_docs
from nfd_gpu.labels.nvidia import MIG_STRATEGIES, NvidiaOptions
from nfd_gpu.labels.profile import Profile
from nfd_gpu.scan import label, run_scan
from tests.conftest import ALL_FIXTURES, REPO, fixture_root
from tests.labels.nvidia_cases import SHARING, fabric_fixture


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


@pytest.mark.parametrize("profile", list(registry.PROFILES.values()), ids=lambda p: p.name)
def test_every_registered_profile_page_is_generated(profile: Profile) -> None:
    module = f"nfd_gpu.labels.{profile.name}"
    assert (REPO / profile.docs).read_text() == profile.render_docs(), (
        f"{profile.docs} is stale: run `python -m {module} > {profile.docs}`"
    )


def test_the_nvidia_profile_has_its_label_table() -> None:
    profile = registry.PROFILES["nvidia"]
    assert profile.table is nvidia.LABEL_TABLE
    assert profile.docs == "docs/labels-nvidia.md"
    page = profile.render_docs()
    for doc in nvidia.LABEL_TABLE:
        assert f"| `nvidia.com/{doc.key}` | {doc.value} | {doc.description} |" in page
    assert len({d.key for d in nvidia.LABEL_TABLE}) == len(nvidia.LABEL_TABLE)
    assert "labels-nvidia.md" in (REPO / "docs/nvidia.md").read_text()


def _nvidia_cases(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(case, nvidia labels) for every NVIDIA fixture x MIG strategy x sharing config (and
    the timestamp), plus a node with NVLink fabric cliques (no fixture has one)."""
    fabric = fabric_fixture(tmp_path, [(bytes(range(1, 17)), 7)] * 2)
    roots = [fixture_root(n) for n in ALL_FIXTURES] + [fabric]
    configs = [None, *sorted(SHARING.glob("*.yaml"))]
    for root in roots:
        snap = run_scan(root, profiles=()).snapshot
        if not any(g.vendor == "nvidia" for g in snap.gpus):
            continue
        for strategy in MIG_STRATEGIES:
            for cfg in configs:
                opts = (
                    load_sharing_config(str(cfg), strategy, 1767225600)
                    if cfg
                    else NvidiaOptions(mig_strategy=strategy, timestamp=1767225600)
                )
                case = f"{root.name}/{strategy}/{cfg.name if cfg else '-'}"
                yield case, label(snap, ("nvidia",), nvidia_options=opts)[0]


def test_the_nvidia_table_is_complete_and_true(tmp_path: Path) -> None:
    """Every key the nvidia profile emits is in its table, and every row of the table is
    emitted by some fixture, strategy and sharing config."""
    seen: set[str] = set()
    for case, labels in _nvidia_cases(tmp_path):
        for key in labels:
            assert nvidia.documented(key), f"{case}: {key} is not in nvidia.LABEL_TABLE"
        seen.update(k.removeprefix("nvidia.com/") for k in labels)
    unused = [d.key for d in nvidia.LABEL_TABLE if not any(d.regex().match(k) for k in seen)]
    assert not unused, f"rows of nvidia.LABEL_TABLE no case emits: {unused}"
