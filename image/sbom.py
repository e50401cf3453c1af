#!/usr/bin/env python3
"""Write the image's SBOM: an SPDX 2.3 JSON document of what image/build.sh put in it.

    python3 image/sbom.py ROOTFS LOCK ARCH VERSION REVISION OUT.spdx.json

Its packages come from the two places the image's contents are decided, nothing guessed:

- the Python distributions: ``LOCK`` (image/requirements-<arch>.txt, name, version and the
  sha256 of the very wheel installed), plus nfd-gpu itself; each is checked against the
  ``*.dist-info`` directory the install left in ``ROOTFS`` (a lock entry not installed, or
  an installed distribution not locked, is an error);
- the Debian packages: ``ROOTFS``'s dpkg status database (``var/lib/dpkg/status``), every
  package in state ``install ok installed`` with its version, architecture and source
  package, as a ``pkg:deb`` purl.

Reproducible: the creation time is ``SOURCE_DATE_EPOCH``, the document namespace is derived
from the name, version, architecture and revision, and packages are sorted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
IMAGE_PY = "python3.11"  # bookworm's python3 (image/build.sh)
NAMESPACE = "https://github.com/nfd-gpu/nfd-gpu/spdx"


def canonical(name: str) -> str:
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 digests) from a pip requirements file with hashes."""
    out: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ \\]+)", line)
        if m:
            current = canonical(m.group(1))
            out[current] = (m.group(2), [])
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            if current is None:
                raise ValueError(f"{lock}: a hash before any requirement")
            out[current][1].append(digest)
    return out


def installed(site: Path) -> dict[str, str]:
    """name -> version of every ``*.dist-info`` under ``site``."""
    out = {}
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        fields: dict[str, str] = {}
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line:
                break  # the body (description) starts
            key, sep, value = line.partition(": ")
            if sep and key not in fields:
                fields[key] = value.strip()
        out[canonical(fields["Name"])] = fields["Version"]
    return out


def dpkg_packages(status: Path) -> list[Obj]:
    """The installed packages of a dpkg status file."""
    pkgs = []
    for stanza in status.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields.get("Status") == "install ok installed":
            pkgs.append(fields)
    return sorted(pkgs, key=lambda f: f["Package"])


def spdx_id(kind: str, name: str) -> str:
    return "SPDXRef-" + kind + "-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def package(sid: str, name: str, version: str, purl: str, **extra: Any) -> Obj:
    return {
        "SPDXID": sid,
        "name": name,
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "externalRefs": [
            {
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": purl,
            }
        ],
        **extra,
    }


def build(rootfs: Path, lock: Path, arch: str, version: str, revision: str) -> Obj:
    site = rootfs / "usr" / "local" / "lib" / IMAGE_PY / "dist-packages"
    want = locked(lock)
    have = installed(site)
    if have.get("nfd-gpu") != version:
        raise ValueError(f"{site}: nfd-gpu {version} is not installed")
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want) - {"nfd-gpu"})
    wrong = sorted(n for n in want if n in have and have[n] != want[n][0])
    if missing or extra or wrong:
        raise ValueError(
            f"{lock} and {site} differ: not installed {missing}, not locked {extra}, "
            f"other versions {wrong}"
        )
    image = spdx_id("Image", f"nfd-gpu-{version}-linux-{arch}")
    packages = [
        package(image, "nfd-gpu image", version,
                f"pkg:oci/nfd-gpu@{version}?arch={arch}",
                primaryPackagePurpose="CONTAINER",
                licenseDeclared="Apache-2.0",
                sourceInfo=f"built by image/build.sh from revision {revision}"),
        package(spdx_id("PyPI", "nfd-gpu"), "nfd-gpu", version, f"pkg:pypi/nfd-gpu@{version}",
                licenseDeclared="Apache-2.0", sourceInfo=f"this repository, revision {revision}"),
    ]  # fmt: skip
    for name in sorted(want):
        ver, digests = want[name]
        packages.append(
            package(
                spdx_id("PyPI", name), name, ver, f"pkg:pypi/{name}@{ver}",
                checksums=[{"algorithm": "SHA256", "checksumValue": d} for d in sorted(digests)],
                sourceInfo=f"locked wheel, {lock.name}",
            )
        )  # fmt: skip
    for f in dpkg_packages(rootfs / "var" / "lib" / "dpkg" / "status"):
        name, ver = f["Package"], f["Version"]
        pkg_arch = f.get("Architecture", arch)
        src = f.get("Source", name).split(" ")[0]
        packages.append(
            package(
                spdx_id("Deb", name), name, ver,
                f"pkg:deb/debian/{name}@{ver}?arch={pkg_arch}&distro=debian-12",
                sourceInfo=f"Debian bookworm, source package {src}",
            )
        )  # fmt: skip
    rels = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
             "relatedSpdxElement": image}]  # fmt: skip
    rels += [
        {"spdxElementId": image, "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]}
        for p in packages[1:]
    ]
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    name = f"nfd-gpu-{version}-linux-{arch}"
    key = hashlib.sha256(f"{name} {revision}".encode()).hexdigest()[:16]
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": name,
        "documentNamespace": f"{NAMESPACE}/{name}-{key}",
        "creationInfo": {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)),
            "creators": ["Tool: nfd-gpu-image-sbom (image/sbom.py)"],
        },
        "documentDescribes": [image],
        "packages": packages,
        "relationships": rels,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 6:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    rootfs, lock, arch, version, revision, out = argv
    try:
        doc = build(Path(rootfs), Path(lock), arch, version, revision)
    except (OSError, ValueError, KeyError) as e:
        print(f"image/sbom.py: error: {e}", file=sys.stderr)
        return 1
    Path(out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"sbom:     {out} ({len(doc['packages']) - 1} packages, SPDX 2.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
