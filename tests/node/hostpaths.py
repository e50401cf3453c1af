"""The one change tests/node makes to the shipped manifests: the DaemonSet's host paths.

A fixture under tests/fixtures/sysfs stands for the host: each ``hostPath`` of the
rendered DaemonSet (``/sys``, ``/proc/driver``, ``/proc/modules``, ``/usr/share``,
``/usr/lib``) points at the fixture's copy, or, where the fixture has none of a directory
every real host has, at an empty directory (a missing path of another type stays the
fixture's, missing, as on such a host). Nothing else is touched.

Also a Helm post-renderer: ``python tests/node/hostpaths.py`` rewrites the documents on
stdin with the mapping in ``$NFD_GPU_TEST_HOST_PATHS`` (JSON), for ``helm install`` and
``helm upgrade --post-renderer``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

ENV = "NFD_GPU_TEST_HOST_PATHS"


def mapping(fixture: Path, empty: Path, objs: list[dict[str, Any]]) -> dict[str, str]:
    """Host path -> fixture path for every hostPath volume of the DaemonSets in ``objs``."""
    out = {}
    for ds in (o for o in objs if o.get("kind") == "DaemonSet"):
        for v in ds["spec"]["template"]["spec"].get("volumes", []):
            if "hostPath" not in v:
                continue
            host = v["hostPath"]["path"]
            src = fixture / host.lstrip("/")
            if src.exists():
                out[host] = str(src)
            elif v["hostPath"].get("type") == "Directory":
                d = empty / host.strip("/").replace("/", "-")
                d.mkdir(parents=True, exist_ok=True)
                d.chmod(0o755)
                out[host] = str(d)
            else:  # the fixture's path, missing: the pod shows what the shipped type does
                out[host] = str(src)
    return out


def swap(objs: list[dict[str, Any]], paths: dict[str, str]) -> list[dict[str, Any]]:
    for ds in (o for o in objs if o and o.get("kind") == "DaemonSet"):
        for v in ds["spec"]["template"]["spec"].get("volumes", []):
            if "hostPath" in v and v["hostPath"]["path"] in paths:
                v["hostPath"]["path"] = paths[v["hostPath"]["path"]]
    return objs


def main() -> None:
    paths = json.loads(os.environ[ENV])
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    sys.stdout.write(yaml.safe_dump_all(swap(docs, paths), sort_keys=False))


if __name__ == "__main__":
    main()
