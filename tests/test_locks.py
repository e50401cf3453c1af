"""Each lock of the images' Python packages (image/lock.py) holds every runtime dependency
of the package: pyproject.toml's ``dependencies`` and its ``kubernetes`` extra (what the
images install), each marker evaluated for that lock's interpreter and platform, each pin
inside the declared range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
IMAGE = {"platform_machine": "", "python_version": "3.11", "python_full_version": "3.11.2"}
DOCKERFILE = {"python_version": "3.12", "python_full_version": "3.12.0"}
# lock -> the environment it is for (None: every platform, markers kept in the lock)
LOCKS: dict[str, dict[str, str] | None] = {
    "requirements-amd64.txt": {**IMAGE, "platform_machine": "x86_64"},
    "requirements-arm64.txt": {**IMAGE, "platform_machine": "aarch64"},
    "requirements.lock": None,
}


def runtime_requirements() -> list[Requirement]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = project["dependencies"] + project["optional-dependencies"]["kubernetes"]
    return [Requirement(r) for r in found]


def pins(lock: str) -> dict[str, tuple[str, str]]:
    """name -> (version, marker text) of a lock."""
    body = (REPO / "image" / lock).read_text()
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)\s*(?:;\s*([^\\\n]*?))?\s*\\?$", body, re.M)
    assert found and body.count("--hash=sha256:") >= len(found), lock
    return {canonicalize_name(n): (v, m) for n, v, m in found}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_lock_holds_every_runtime_dependency(lock: str) -> None:
    env = LOCKS[lock]
    locked = pins(lock)
    for req in runtime_requirements():
        name = canonicalize_name(req.name)
        applies = (
            req.marker is None
            or env is None
            or req.marker.evaluate(
                {**default_environment(), "sys_platform": "linux", "extra": "", **env}
            )
        )
        if not applies:
            assert name not in locked, f"image/{lock}: {name} locked, but {req.marker} is false"
            continue
        assert name in locked, f"image/{lock}: {req} missing (python3 image/lock.py)"
        version, marker = locked[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"image/{lock}: {name}=={version} not {req}"
        )
        if env is None and req.marker is not None:
            assert marker, f"image/{lock}: {name} lost its marker {req.marker}"
