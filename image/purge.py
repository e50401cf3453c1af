"""Remove Debian packages from an image root filesystem without running them: their files
(as ``/var/lib/dpkg/info/<pkg>.list`` names them), their ``info`` files and their stanza
in ``/var/lib/dpkg/status``.

image/build.sh purges what it can with dpkg itself (maintainer scripts run); this is for
the packages that dpkg's maintainer scripts need to run at all: ``dash`` (``/bin/sh``)
and ``dpkg``. The status database stays true to the files, so a vulnerability scanner
that reads it (Trivy, Grype) lists exactly what the image holds.

    python3 image/purge.py ROOTFS PACKAGE...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _stanzas(text: str) -> list[str]:
    return [s for s in text.split("\n\n") if s.strip()]


def _name(stanza: str) -> str:
    for line in stanza.splitlines():
        if line.startswith("Package: "):
            return line.split(": ", 1)[1].strip()
    return ""


def purge(rootfs: Path, packages: list[str]) -> list[str]:
    """Remove ``packages``; returns the files removed (relative to ``rootfs``)."""
    info = rootfs / "var/lib/dpkg/info"
    removed: list[str] = []
    for pkg in packages:
        lists = sorted(info.glob(f"{pkg}.list")) + sorted(info.glob(f"{pkg}:*.list"))
        if not lists:
            raise SystemExit(f"image/purge.py: {pkg}: not installed in {rootfs}")
        for lst in lists:
            for line in lst.read_text().splitlines():
                p = rootfs / line.lstrip("/")
                # directories stay (shared with other packages), links to one too (the
                # merged-/usr links /bin, /lib); files and other links go
                if not p.is_dir() and os.path.lexists(p):
                    p.unlink()
                    removed.append(line)
        for f in info.iterdir():
            if f.name.startswith((f"{pkg}.", f"{pkg}:")):
                f.unlink()
    status = rootfs / "var/lib/dpkg/status"
    kept = [s for s in _stanzas(status.read_text()) if _name(s) not in packages]
    status.write_text("\n\n".join(kept) + "\n\n")
    shells = rootfs / "etc/shells"
    if shells.exists():  # what debianutils' update-shells trigger would have done
        lines = shells.read_text().splitlines()
        left = [ln for ln in lines if ln.startswith("#") or os.path.lexists(rootfs / ln[1:])]
        shells.write_text("".join(f"{ln}\n" for ln in left))
    return removed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    removed = purge(Path(argv[0]), argv[1:])
    print(f"image/purge.py: {', '.join(argv[1:])}: {len(removed)} files removed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
