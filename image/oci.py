#!/usr/bin/env python3
"""Write a root filesystem as a one-layer OCI image: layout directory + oci-archive tarball.

The layer is a GNU tar of ROOTFS made reproducible (entries sorted by name, every mtime
set to --epoch, numeric owners, no atime/ctime, fixed PAX header names) and gzip'd
without a name or timestamp. The config, manifest and index are canonical JSON (sorted
keys, no spaces) with sha256 digests, as the OCI image spec v1.0 lays out:

    OUT.oci/oci-layout, OUT.oci/index.json, OUT.oci/blobs/sha256/<digest>
    OUT.oci.tar   (the same files as one tar: skopeo's ``oci-archive:`` transport)

Same ROOTFS content + same arguments = byte-identical output. Used by image/build.sh:

    python3 image/oci.py --rootfs DIR --out build/image/nfd-gpu-0.1.0-linux-amd64 \\
        --arch amd64 --epoch 1700000000 --tag 0.1.0 --user 65532:65532 \\
        --entrypoint nfd-gpu --entrypoint run --env PATH=... --port 8081/tcp \\
        --label org.opencontainers.image.version=0.1.0 ...
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_layer(rootfs: Path, dest: Path, epoch: int) -> tuple[str, str, int]:
    """Tar + gzip ROOTFS into DEST; returns (diff_id, digest, size) of the gzip'd blob."""
    plain = dest.with_suffix(".tar")
    subprocess.run(
        [
            "tar",
            "--create",
            "--file",
            str(plain),
            "--directory",
            str(rootfs),
            "--sort=name",
            "--numeric-owner",
            f"--mtime=@{epoch}",
            "--format=posix",
            "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
            ".",
        ],
        check=True,
    )
    diff_id = sha256_file(plain)
    # mtime=0 and no file name in the gzip header: the blob depends on content only.
    with (
        open(plain, "rb") as src,
        open(dest, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz,
    ):
        shutil.copyfileobj(src, gz, 1 << 20)
    plain.unlink()
    return diff_id, sha256_file(dest), dest.stat().st_size


def _blob(layout: Path, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return digest, len(data)


def write_image(
    rootfs: Path,
    out: Path,
    *,
    arch: str,
    epoch: int,
    tag: str,
    config: dict[str, Any],
    labels: dict[str, str],
    created_by: str,
) -> dict[str, Any]:
    """Write OUT.oci/ and OUT.oci.tar; returns a summary (digests and sizes)."""
    layout = out.with_name(out.name + ".oci")
    if layout.exists():
        shutil.rmtree(layout)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    tmp_layer = layout / "layer.tar.gz"
    diff_id, layer_digest, layer_size = make_layer(rootfs, tmp_layer, epoch)
    tmp_layer.rename(layout / "blobs" / "sha256" / layer_digest)
    created = dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    image_config = {
        "created": created,
        "architecture": arch,
        "os": "linux",
        "config": {**config, "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": created_by}],
    }
    cfg_digest, cfg_size = _blob(layout, canonical(image_config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": f"sha256:{cfg_digest}", "size": cfg_size},
        "layers": [{"mediaType": MT_LAYER, "digest": f"sha256:{layer_digest}", "size": layer_size}],
        "annotations": labels,
    }
    man_digest, man_size = _blob(layout, canonical(manifest))
    entry = {
        "mediaType": MT_MANIFEST,
        "digest": f"sha256:{man_digest}",
        "size": man_size,
        "platform": {"architecture": arch, "os": "linux"},
    }
    archive = finish_layout(layout, out, entry, tag, epoch)
    return {
        "archive": str(archive),
        "layout": str(layout),
        "manifest": f"sha256:{man_digest}",
        "config": f"sha256:{cfg_digest}",
        "layer": f"sha256:{layer_digest}",
        "layer_bytes": layer_size,
        "archive_bytes": archive.stat().st_size,
    }


def finish_layout(layout: Path, out: Path, entry: dict[str, Any], tag: str, epoch: int) -> Path:
    """The layout's ``index.json`` (its one ``entry``, tagged ``tag``) and ``oci-layout``,
    then the layout as the archive ``OUT.oci.tar``, which it returns."""
    index = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [{**entry, "annotations": {"org.opencontainers.image.ref.name": tag}}],
    }
    (layout / "index.json").write_bytes(canonical(index))
    (layout / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))
    archive = out.with_name(out.name + ".oci.tar")
    _archive(layout, archive, epoch)
    return archive


def _archive(layout: Path, archive: Path, epoch: int) -> None:
    """The layout as one tar, reproducibly (sorted, fixed owner and mtime)."""
    names = sorted(p.relative_to(layout).as_posix() for p in layout.rglob("*"))
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            path = layout / name
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            info.mode = 0o755 if info.isdir() else 0o644
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"oci.py: error: {what} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rootfs", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="path prefix of the outputs")
    ap.add_argument("--arch", required=True, help="OCI architecture: amd64, arm64")
    ap.add_argument("--epoch", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    ap.add_argument("--tag", required=True, help="org.opencontainers.image.ref.name")
    ap.add_argument("--user", default="")
    ap.add_argument("--entrypoint", action="append", default=[])
    ap.add_argument("--cmd", action="append", default=[])
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeatable)")
    ap.add_argument("--port", action="append", default=[], help="e.g. 8081/tcp")
    ap.add_argument("--workdir", default="/")
    ap.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeatable)")
    ap.add_argument("--created-by", default="image/build.sh")
    args = ap.parse_args(argv)
    if not args.rootfs.is_dir():
        print(f"oci.py: error: --rootfs {args.rootfs}: not a directory", file=sys.stderr)
        return 2
    _pairs(args.env, "--env")  # validated; kept as KEY=VALUE strings
    config: dict[str, Any] = {"Env": args.env, "WorkingDir": args.workdir}
    if args.user:
        config["User"] = args.user
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.cmd:
        config["Cmd"] = args.cmd
    if args.port:
        config["ExposedPorts"] = {p: {} for p in args.port}
    summary = write_image(
        args.rootfs,
        args.out,
        arch=args.arch,
        epoch=args.epoch,
        tag=args.tag,
        config=config,
        labels=_pairs(args.label, "--label"),
        created_by=args.created_by,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
