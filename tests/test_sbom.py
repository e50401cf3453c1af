"""The SBOM image/build.sh writes beside each image (image/sbom.py), judged by the SPDX
project's own validator (spdx-tools) and against what the image really contains: the
Python distributions installed in its root filesystem and its dpkg status; and the
multi-arch index (image/index.py) read back by skopeo."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.required_tools import need
from tests.test_image import TOOLS, archive, image  # noqa: F401  (fixtures)

IMAGE_PY = "python3.11"


def sbom_of(archive: Path) -> Path:  # noqa: F811
    return archive.with_name(archive.name.removesuffix(".oci.tar") + ".spdx.json")


def test_sbom_is_valid_spdx(archive: Path) -> None:  # noqa: F811
    from spdx_tools.spdx.parser.parse_anything import parse_file
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    path = sbom_of(archive)
    assert path.is_file(), f"{path}: no SBOM beside the image"
    messages = validate_full_spdx_document(parse_file(str(path)))
    assert not messages, [m.validation_message for m in messages][:10]


def _purls(doc: dict[str, Any], kind: str) -> dict[str, str]:
    out = {}
    for p in doc["packages"]:
        for ref in p.get("externalRefs", []):
            m = re.match(rf"pkg:{kind}/(?:debian/)?([^@]+)@([^?]+)", ref["referenceLocator"])
            if m:
                out[m.group(1)] = m.group(2)
    return out


def test_sbom_lists_what_the_image_contains(
    archive: Path,  # noqa: F811
    image: dict[str, Any],  # noqa: F811
) -> None:
    doc = json.loads(sbom_of(archive).read_text())
    rootfs: Path = image["rootfs"]
    site = rootfs / "usr" / "local" / "lib" / IMAGE_PY / "dist-packages"
    dists = {}
    for meta in site.glob("*.dist-info/METADATA"):
        head = meta.read_text(errors="replace").split("\n\n", 1)[0]
        fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
        dists[re.sub(r"[-_.]+", "-", fields["Name"]).lower()] = fields["Version"]
    assert "nfd-gpu" in dists and len(dists) > 10
    assert _purls(doc, "pypi") == dists
    debs = {}
    status = (rootfs / "var" / "lib" / "dpkg" / "status").read_text(errors="replace")
    for stanza in status.split("\n\n"):
        f = dict(ln.split(": ", 1) for ln in stanza.splitlines() if ": " in ln and ln[0] != " ")
        if f.get("Status") == "install ok installed":
            debs[f["Package"]] = f["Version"]
    assert "python3" in debs
    assert _purls(doc, "deb") == debs
    # the wheels' digests are the lock's
    arch = "arm64" if "arm64" in archive.name else "amd64"
    lock = (archive.parents[2] / "image" / f"requirements-{arch}.txt").read_text()
    for p in doc["packages"]:
        for c in p.get("checksums", []):
            assert f"sha256:{c['checksumValue']}" in lock, p["name"]


def test_multi_arch_index(tmp_path: Path) -> None:
    """image/index.py joins the per-architecture layouts: skopeo reads an index with both
    platforms, each pointing at its architecture's own manifest."""
    from tests.test_image import MACHINES, binfmt_missing, image_path

    layouts = []
    for arch in MACHINES:
        path = image_path(arch)
        layout = path.with_name(path.name.removesuffix(".tar"))
        if binfmt_missing(arch) or not layout.is_dir():
            pytest.skip(f"{layout}: not built (both architectures are needed)")
        layouts.append(layout)
    skopeo = need("skopeo", TOOLS)
    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "nfd-gpu"
    version = layouts[0].name.split("-")[2]
    p = subprocess.run(
        ["python3", str(repo / "image" / "index.py"), str(out), *map(str, layouts),
         "--tag", version, "--epoch", "0"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    raw = subprocess.run(
        [skopeo, "inspect", "--raw", f"oci-archive:{out}.oci.tar"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    index = json.loads(raw.stdout)
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    by_arch = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    for layout in layouts:
        (own,) = json.loads((layout / "index.json").read_text())["manifests"]
        assert by_arch[own["platform"]["architecture"]] == own["digest"]
    for arch in by_arch:
        cfg = subprocess.run(
            [skopeo, "inspect", "--override-arch", arch, "--config",
             f"oci-archive:{out}.oci.tar"],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        assert json.loads(cfg.stdout)["architecture"] == arch
