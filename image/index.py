#!/usr/bin/env python3
"""The multi-arch image: one OCI layout whose index lists the per-architecture images.

    python3 image/index.py OUT/nfd-gpu-<version> LAYOUT.oci... --tag <version> --epoch N

Reads the layouts image/oci.py wrote (``nfd-gpu-<version>-linux-<arch>.oci/``), checks
that they are one build (same version tag, same revision label, one image per
architecture), and writes ``OUT.oci/`` (the blobs of all of them, an ``index.json``
naming each manifest with its platform) and ``OUT.oci.tar`` (skopeo's ``oci-archive:``),
reproducibly. Publish it with ``skopeo copy --all oci-archive:OUT.oci.tar docker://...``
(RELEASING.md). image/build.sh runs this after building an architecture when the other's
layout of the same version and revision is there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oci import MT_INDEX, canonical, finish_layout  # beside this script

REVISION = "org.opencontainers.image.revision"


def _blob(layout: Path, digest: str) -> Path:
    algo, _, hexd = digest.partition(":")
    return layout / "blobs" / algo / hexd


def read(layout: Path) -> tuple[dict[str, Any], str]:
    """The one manifest entry of a per-architecture layout, and its revision label."""
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    manifest = json.loads(_blob(layout, entry["digest"]).read_text())
    config = json.loads(_blob(layout, manifest["config"]["digest"]).read_text())
    labels = (config.get("config") or {}).get("Labels") or {}
    return entry, str(labels.get(REVISION, ""))


def write_index(out: Path, layouts: list[Path], tag: str, epoch: int) -> dict[str, Any]:
    entries, revisions = [], set()
    for layout in layouts:
        entry, revision = read(layout)
        ref = (entry.get("annotations") or {}).get("org.opencontainers.image.ref.name")
        if ref != tag:
            raise ValueError(f"{layout}: tagged {ref!r}, not {tag!r}")
        entries.append((layout, entry))
        revisions.add(revision)
    if len(revisions) != 1:
        raise ValueError(f"the layouts are of different revisions: {sorted(revisions)}")
    arches = [e["platform"]["architecture"] for _, e in entries]
    if len(set(arches)) != len(arches):
        raise ValueError(f"one image per architecture, got {arches}")
    dest = out.with_name(out.name + ".oci")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "blobs" / "sha256").mkdir(parents=True)
    for layout, _ in entries:
        for blob in (layout / "blobs" / "sha256").iterdir():
            target = dest / "blobs" / "sha256" / blob.name
            if not target.exists():
                shutil.copyfile(blob, target)
    # The multi-arch image is an image index blob (each architecture's manifest with its
    # platform, no per-image tag); the layout's own index.json tags that one blob, as a
    # registry's multi-arch tag names one index.
    manifests = [
        {k: v for k, v in e.items() if k != "annotations"}
        for e in sorted((e for _, e in entries), key=lambda e: str(e["platform"]["architecture"]))
    ]
    image_index = canonical({"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": manifests})
    digest = hashlib.sha256(image_index).hexdigest()
    (dest / "blobs" / "sha256" / digest).write_bytes(image_index)
    entry = {"mediaType": MT_INDEX, "digest": f"sha256:{digest}", "size": len(image_index)}
    archive = finish_layout(dest, out, entry, tag, epoch)
    return {
        "archive": str(archive),
        "layout": str(dest),
        "index": f"sha256:{digest}",
        "architectures": sorted(arches),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("layouts", type=Path, nargs="+")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--epoch", type=int, required=True)
    args = ap.parse_args(argv)
    try:
        summary = write_index(args.out, args.layouts, args.tag, args.epoch)
    except (OSError, ValueError, KeyError) as e:
        print(f"image/index.py: error: {e}", file=sys.stderr)
        return 1
    print(f"index:    {summary['archive']} ({', '.join(summary['architectures'])})")
    print(f"digest:   {summary['index']} (the multi-arch image)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
