"""The images image/build.sh writes (build/image/nfd-gpu-<version>-linux-<arch>.oci.tar):
loadable by standard tools (skopeo, umoci), and nfd-gpu runs inside its root filesystem
(chroot, as the image's non-root user).

Both architectures: this machine's, and the other one (arm64 on amd64, amd64 on arm64)
run under qemu-user-static through binfmt_misc (``ARCH=arm64 bash image/build.sh``,
docs/image.md). Skipped when no image was built (``bash image/build.sh``); .ci/run builds
them first and sets CI_REQUIRE_TOOLS=1, which turns a missing image or tool into a failure.
The other architecture is skipped (CI too) only when this machine cannot run its binaries:
no qemu interpreter registered in /proc/sys/fs/binfmt_misc.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu import __version__
from nfd_gpu.scan import run_scan
from tests.conftest import REPO, fixture_root
from tests.k8s_api_server import running
from tests.required_tools import REQUIRED, need

MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
ARCH = {m: a for a, m in MACHINES.items()}.get(platform.machine(), platform.machine())
OTHER = {"amd64": "arm64", "arm64": "amd64"}.get(ARCH, "")
TOOLS = "apt-get install skopeo umoci"


def image_path(arch: str) -> Path:
    if arch == ARCH and os.environ.get("NFD_GPU_IMAGE"):
        return Path(os.environ["NFD_GPU_IMAGE"])
    return REPO / "build" / "image" / f"nfd-gpu-{__version__}-linux-{arch}.oci.tar"


def binfmt_missing(arch: str) -> str | None:
    """Why this machine cannot run ``arch``'s binaries (None: it can)."""
    if arch == ARCH:
        return None
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    entry = binfmt / f"qemu-{MACHINES[arch]}"
    if not (binfmt / "status").exists():
        return f"{binfmt} is not mounted (mount -t binfmt_misc binfmt_misc {binfmt})"
    if not entry.exists() or entry.read_text().splitlines()[0] != "enabled":
        return f"no enabled {entry} (apt-get install qemu-user-static binfmt-support)"
    return None


@pytest.fixture(scope="module", params=[ARCH, OTHER])
def archive(request: pytest.FixtureRequest) -> Path:
    arch: str = request.param
    if arch not in MACHINES:
        pytest.skip(f"image/build.sh builds amd64 and arm64 only, not for {platform.machine()}")
    why = binfmt_missing(arch)
    if why:
        pytest.skip(f"{arch} image not runnable on this {ARCH} machine: {why}")
    path = image_path(arch)
    if not path.is_file():
        message = f"{path}: no image built (ARCH={arch} bash image/build.sh)"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    if os.geteuid() != 0:
        pytest.skip("chroot needs root")
    return path


@pytest.fixture(scope="module")
def image(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The archive unpacked by umoci: {"rootfs": Path, "config": OCI runtime config}."""
    umoci = need("umoci", TOOLS)
    tmp = tmp_path_factory.mktemp("image")
    layout = tmp / "layout"
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="data")
    bundle = tmp / "bundle"
    subprocess.run(
        [umoci, "unpack", "--image", f"{layout}:{__version__}", str(bundle)],
        check=True,
        capture_output=True,
    )
    config = json.loads((bundle / "config.json").read_text())
    arch = archive.name.removesuffix(".oci.tar").rsplit("-", 1)[1]
    yield {"rootfs": bundle / "rootfs", "config": config, "layout": layout, "arch": arch}
    shutil.rmtree(tmp, ignore_errors=True)


def _in_image(image: dict[str, Any], *argv: str) -> subprocess.CompletedProcess[str]:
    """Run argv in the image's root filesystem with its user, environment and PATH."""
    proc = image["config"]["process"]
    user = f"{proc['user']['uid']}:{proc['user']['gid']}"
    env = dict(e.split("=", 1) for e in proc["env"])
    return subprocess.run(
        ["chroot", f"--userspec={user}", str(image["rootfs"]), "/usr/bin/env", "-i",
         *(f"{k}={v}" for k, v in env.items()), *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_skopeo_reads_the_archive(archive: Path) -> None:
    skopeo = need("skopeo", TOOLS)
    p = subprocess.run(
        [skopeo, "inspect", f"oci-archive:{archive}"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["Architecture"] == archive.name.removesuffix(".oci.tar").rsplit("-", 1)[1]
    assert info["Os"] == "linux"
    labels = info["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.title"] == "nfd-gpu"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    for key in ("revision", "created", "source", "description"):
        assert labels[f"org.opencontainers.image.{key}"], key
    assert len(info["Layers"]) == 1


def test_config_runs_nfd_gpu_as_non_root(image: dict[str, Any]) -> None:
    proc = image["config"]["process"]
    assert proc["user"]["uid"] == 65532 and proc["user"]["gid"] == 65532
    assert proc["args"][:2] == ["nfd-gpu", "run"]
    passwd = (image["rootfs"] / "etc" / "passwd").read_text()
    assert "nfd-gpu:x:65532:65532:" in passwd


def test_entrypoint_handles_sigterm_from_its_first_instruction(image: dict[str, Any]) -> None:
    """The Entrypoint's ``nfd-gpu`` is the console script pyproject declares, which starts in
    nfd_gpu/entry.py (SIGTERM handled before the heavy imports: the agent is PID 1)."""
    env = dict(e.split("=", 1) for e in image["config"]["process"]["env"])
    found = [
        d / "nfd-gpu"
        for d in (image["rootfs"] / p.lstrip("/") for p in env["PATH"].split(":"))
        if (d / "nfd-gpu").is_file()
    ]
    assert found, f"no nfd-gpu on the image's PATH {env['PATH']}"
    assert "from nfd_gpu.entry import console" in found[0].read_text()


def test_rule_engines_import(image: dict[str, Any]) -> None:
    """google-re2 (InRegexp, the template regex functions) is installed and loads."""
    p = _in_image(image, "python3", "-c", "import re2; print(re2.search('a+', 'baa').group())")
    assert (p.returncode, p.stdout) == (0, "aa\n"), p.stderr


# What nfd-gpu never runs: build tools, pip, shells, package
# managers, perl, the setuid programs' names.
NOT_IN_IMAGE = (
    "pip", "pip3", "gcc", "cc", "c++", "make", "ld", "as",
    "sh", "bash", "dash", "rbash", "apt", "apt-get", "apt-key", "dpkg", "dpkg-deb", "perl",
    "su", "mount", "umount", "passwd", "chfn", "chsh", "newgrp", "gpasswd", "unix_chkpwd",
)  # fmt: skip


def test_no_build_tools_shells_or_package_managers(image: dict[str, Any]) -> None:
    root: Path = image["rootfs"]
    for tool in NOT_IN_IMAGE:
        for d in ("usr/bin", "usr/local/bin", "usr/sbin", "bin", "sbin"):
            assert not os.path.lexists(root / d / tool), f"/{d}/{tool}"
    assert not list(root.glob("usr/lib/python3*/*-packages/pip"))
    assert not list(root.glob("usr/local/lib/python3*/*-packages/pip"))
    assert not list(root.glob("usr/lib/gcc*"))


def test_no_setuid_or_setgid_files(image: dict[str, Any]) -> None:
    root: Path = image["rootfs"]
    found = []
    for dirpath, _, files in os.walk(root):
        for n in files:
            p = Path(dirpath) / n
            if not p.is_symlink() and p.lstat().st_mode & 0o6000:
                found.append(str(p.relative_to(root)))
    assert found == []


def test_package_database_matches_the_files(image: dict[str, Any]) -> None:
    """The purged packages are gone from /var/lib/dpkg/status as well (scanners read it),
    every package left is fully installed, and each one's listed files exist."""
    root: Path = image["rootfs"]
    status = (root / "var/lib/dpkg/status").read_text()
    stanzas = [s for s in status.split("\n\n") if s.strip()]
    names = {
        ln.split(": ", 1)[1] for s in stanzas for ln in s.splitlines() if ln.startswith("Package:")
    }
    assert "python3" in names and "libc6" in names
    for gone in ("dash", "dpkg", "bash", "apt", "perl-base", "login", "passwd", "mount"):
        assert gone not in names, gone
    assert all("Status: install ok installed" in s for s in stanzas)
    info = root / "var/lib/dpkg/info"
    for name in ("python3.11-minimal", "libudev1"):
        lists = list(info.glob(f"{name}.list")) + list(info.glob(f"{name}:*.list"))
        assert lists, name
        for line in lists[0].read_text().splitlines():
            if not line.startswith("/usr/share/"):  # docs, man pages: trimmed by design
                assert os.path.lexists(root / line.lstrip("/")), line


def test_udev_library_loads_without_a_shell(image: dict[str, Any]) -> None:
    """pyudev finds libudev through ctypes.util.find_library (ldconfig, no /bin/sh). The
    /dev/null every container runtime provides is made here (the layer has an empty /dev;
    subprocess opens /dev/null for ldconfig's stdin)."""
    null = image["rootfs"] / "dev" / "null"
    if not null.exists():
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.chmod(null, 0o666)
    p = _in_image(image, "python3", "-c", "import pyudev; pyudev.Context(); print('ok')")
    assert (p.returncode, p.stdout) == (0, "ok\n"), p.stderr


def test_version_inside_the_image(image: dict[str, Any]) -> None:
    """Also the other architecture's image, its binaries run by qemu through binfmt_misc:
    the interpreter really is that architecture's."""
    p = _in_image(image, "python3", "-c", "import platform; print(platform.machine())")
    assert (p.returncode, p.stdout) == (0, MACHINES[image["arch"]] + "\n"), p.stderr
    p = _in_image(image, "nfd-gpu", "version")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"nfd-gpu {__version__}\n"
    p = _in_image(image, "nfd-gpu", "--version")
    assert (p.returncode, p.stdout) == (0, f"nfd-gpu {__version__}\n"), p.stderr


@pytest.mark.parametrize("name", ["hgx-h100", "mi300x-sriov-host", "max1550-xe"])
def test_scan_inside_the_image(image: dict[str, Any], tmp_path: Path, name: str) -> None:
    """Labels from the image's nfd-gpu on a fixture copied into its root filesystem equal the
    labels this checkout computes for the same fixture."""
    dest = image["rootfs"] / "tmp" / name
    shutil.copytree(fixture_root(name), dest, symlinks=True)
    try:
        p = _in_image(image, "nfd-gpu", "scan", "--root", f"/tmp/{name}")
        assert p.returncode == 0, p.stderr
        here = run_scan(fixture_root(name))
        assert p.stdout == "".join(f"{k}={v}\n" for k, v in sorted(here.labels.items()))
        assert "gpu.feature.node.kubernetes.io/present=true" in p.stdout
    finally:
        shutil.rmtree(dest)


def test_agent_inside_the_image_publishes_a_nodefeature(image: dict[str, Any]) -> None:
    """``nfd-gpu run --oneshot --output nodefeature`` from the image against the test API
    server on loopback: the kubernetes client in the image works (kubernetes/aio trimmed)."""
    name = "hgx-h100"
    rootfs: Path = image["rootfs"]
    dest = rootfs / "tmp" / name
    shutil.copytree(fixture_root(name), dest, symlinks=True)
    try:
        with running() as api:
            api.kubeconfig(str(rootfs / "tmp" / "kubeconfig"))
            p = _in_image(image, "nfd-gpu", "run", "--oneshot", "--no-udev",
                          "--root", f"/tmp/{name}", "--output", "nodefeature",
                          "--kubeconfig", "/tmp/kubeconfig", "--node-name", "node-a",
                          "--namespace", "nfd-gpu", "--owner-refs", "")  # fmt: skip
            assert p.returncode == 0, p.stderr
            obj = api.get("nfd-gpu", "nfd-gpu-node-a")
        assert obj is not None
        assert obj["spec"]["labels"] == run_scan(fixture_root(name)).labels
        assert f"nfd-gpu {__version__} starting: outputs=nodefeature" in p.stderr
    finally:
        shutil.rmtree(dest)
        (rootfs / "tmp" / "kubeconfig").unlink(missing_ok=True)


def test_layout_digests(image: dict[str, Any]) -> None:
    """Every blob the index reaches is present with the digest and size it is named by."""
    import hashlib

    layout: Path = image["layout"]
    index = json.loads((layout / "index.json").read_text())
    todo = list(index["manifests"])
    seen = 0
    while todo:
        desc = todo.pop()
        blob = layout / "blobs" / "sha256" / desc["digest"].split(":", 1)[1]
        assert blob.stat().st_size == desc["size"]
        h = hashlib.sha256()
        with open(blob, "rb") as f:  # streamed: the pytest process stays small
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        assert "sha256:" + h.hexdigest() == desc["digest"]
        seen += 1
        if desc["mediaType"].endswith("manifest.v1+json"):
            man = json.loads(blob.read_text())
            todo += [man["config"], *man["layers"]]
    assert seen == 3


def _tiny_rootfs(root: Path) -> None:
    (root / "etc").mkdir(parents=True)
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=test\n")
    os.link(root / "etc" / "os-release", root / "usr" / "bin" / "hard")
    (root / "usr" / "bin" / "link").symlink_to("/etc/os-release")


def _write(rootfs: Path, out: Path) -> dict[str, Any]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("image_oci", REPO / "image" / "oci.py")
    assert spec and spec.loader
    oci = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oci)
    summary: dict[str, Any] = oci.write_image(
        rootfs,
        out,
        arch="amd64",
        epoch=1_700_000_000,
        tag="t",
        config={"Env": ["PATH=/usr/bin"], "User": "65532:65532"},
        labels={"org.opencontainers.image.version": "t"},
        created_by="test",
    )
    return summary


def test_oci_writer_is_reproducible_and_skopeo_reads_it(tmp_path: Path) -> None:
    """image/oci.py on the same tree twice (files touched in between): identical bytes."""
    rootfs = tmp_path / "rootfs"
    _tiny_rootfs(rootfs)
    a = _write(rootfs, tmp_path / "a" / "img")
    os.utime(rootfs / "etc" / "os-release", (1, 1))  # mtimes do not reach the layer
    b = _write(rootfs, tmp_path / "b" / "img")
    assert a["manifest"] == b["manifest"]
    assert Path(a["archive"]).read_bytes() == Path(b["archive"]).read_bytes()
    (rootfs / "etc" / "os-release").write_text("ID=other\n")
    c = _write(rootfs, tmp_path / "c" / "img")
    assert c["layer"] != a["layer"]
    skopeo = need("skopeo", TOOLS)
    p = subprocess.run(
        [skopeo, "inspect", f"oci-archive:{a['archive']}"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["Labels"] == {"org.opencontainers.image.version": "t"}
    with tarfile.open(Path(a["layout"]) / "blobs" / "sha256" / a["layer"].split(":")[1]) as t:
        members = {m.name: m for m in t.getmembers()}
    assert members["./usr/bin/hard"].islnk() or members["./etc/os-release"].islnk()
    assert members["./usr/bin/link"].issym()
    assert {m.mtime for m in members.values()} == {1_700_000_000}
