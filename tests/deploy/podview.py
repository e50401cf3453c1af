"""The pod's view of a host: what the nfd-gpu container can read, built from the manifests.

A fixture under ``tests/fixtures/sysfs/<name>/`` is a full host root. The DaemonSet sees
only what its volumes mount: :func:`build` copies, for every ``hostPath`` volume the agent
container mounts, the host path of the fixture to the container's mount path below a
temporary "container root", and nothing else (links are copied as links, so a link that
leaves its mount dangles in the pod view as it does in a real pod). Paths the image
itself provides (the rules under ``--rules``) come from the Dockerfile's ``COPY`` lines.

PCI config space: the kernel gives a reader without ``CAP_SYS_ADMIN`` (in the initial user
namespace) only the first 64 bytes of a function's ``config`` file (128 for a CardBus
bridge; ``drivers/pci/pci-sysfs.c`` ``pci_read_config``), so unless the container has that
capability :func:`build` cuts every ``config`` file to what the pod can read.

``nvml.json`` in a fixture is a recording of what NVML answers on that host. In the pod,
NVML answers only under the NVIDIA container runtime (``runtimeClassName: nvidia``, the
``nvml`` overlay), so the recording is carried into the pod view only then.

Nothing here knows the overlays by name: it reads the rendered objects, so it keeps
working when ``deploy/`` is restructured (components, a chart) as long as the test
renders the DaemonSet the user would apply.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

NVML_RECORDING = "nvml.json"
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
NVIDIA_RUNTIME_CLASS = "nvidia"
# The downward-API values a kubelet would fill in.
DOWNWARD = {
    "spec.nodeName": "node-1",
    "metadata.name": "nfd-gpu-x",
    "metadata.namespace": "nfd-gpu",
    "metadata.uid": "0000",
}


@dataclass(frozen=True)
class Mount:
    container_path: str  # absolute, in the container
    host_path: str  # absolute, on the host
    host_type: str  # hostPath.type ("" when unset)
    read_only: bool


@dataclass(frozen=True)
class PodSpec:
    """What of the rendered DaemonSet decides the agent's view and settings."""

    mounts: tuple[Mount, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    nvml: bool  # NVML answers in the container (NVIDIA runtime class)
    sys_admin: bool = False  # CAP_SYS_ADMIN in effect: reads whole PCI config spaces


def daemonset(objs: list[Obj], name: str = "nfd-gpu") -> Obj:
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet" and o["metadata"]["name"] == name]
    return ds


def pod_spec(objs: list[Obj], container: str = "nfd-gpu") -> PodSpec:
    spec = daemonset(objs)["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == container]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = []
    for m in c.get("volumeMounts", []):
        vol = volumes[m["name"]]
        if "hostPath" not in vol:
            continue  # emptyDir, projected, ...: no host content
        assert "subPath" not in m, f"{m['name']}: subPath mounts are not modelled"
        mounts.append(
            Mount(
                container_path=m["mountPath"],
                host_path=vol["hostPath"]["path"],
                host_type=vol["hostPath"].get("type", ""),
                read_only=bool(m.get("readOnly")),
            )
        )
    env: dict[str, str] = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = DOWNWARD[e["valueFrom"]["fieldRef"]["fieldPath"]]
    sc = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
    caps = sc.get("capabilities", {})
    added = {x.upper().removeprefix("CAP_") for x in caps.get("add", [])}
    dropped = {x.upper().removeprefix("CAP_") for x in caps.get("drop", [])}
    root = sc.get("runAsUser", 0) == 0 and not sc.get("runAsNonRoot")
    # A non-root process gets no effective capability from capabilities.add; root keeps
    # the runtime's default set, which has no CAP_SYS_ADMIN.
    sys_admin = bool(sc.get("privileged")) or (
        root and "SYS_ADMIN" in added and not {"ALL", "SYS_ADMIN"} & dropped - added
    )
    return PodSpec(
        mounts=tuple(mounts),
        args=tuple(c.get("args", [])),
        env=env,
        nvml=spec.get("runtimeClassName") == NVIDIA_RUNTIME_CLASS,
        sys_admin=sys_admin,
    )


def image_copies(dockerfile: Path) -> dict[str, Path]:
    """``COPY <repo glob> <dir>/`` lines of the final stage: container dir -> repo dir."""
    out: dict[str, Path] = {}
    stage = ""
    for line in dockerfile.read_text().splitlines():
        if line.startswith("FROM "):
            stage = line
            out = {}  # only the last stage is the image
        m = re.match(r"^COPY (?!--from)(\S+)/\*\.\w+ (/\S+)/$", line)
        if m and stage:
            out[m.group(2)] = dockerfile.parent / m.group(1)
    return out


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)


def build(fixture: Path, pod: PodSpec, container_root: Path) -> None:
    """Populate ``container_root`` with what the container sees of ``fixture``."""
    for m in sorted(pod.mounts, key=lambda m: m.container_path.count("/")):
        src = fixture / m.host_path.lstrip("/")
        dst = container_root / m.container_path.lstrip("/")
        if src.exists() or src.is_symlink():
            _copy(src, dst)
        elif m.host_type in ("", "DirectoryOrCreate", "Directory"):
            # The kubelet (or the runtime) creates a missing directory; a real host always
            # has the "Directory" ones (/sys, /proc, /usr/share, /usr/lib; the
            # host-runtime-config component's where it is used), a fixture may omit them.
            dst.mkdir(parents=True, exist_ok=True)
        elif m.host_type == "FileOrCreate":
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.touch()
        # File/Socket/CharDevice/BlockDevice that do not exist: the pod would not start.
    if not pod.sys_admin:
        for config in container_root.rglob("config"):
            if (
                config.is_file()
                and not config.is_symlink()
                and PCI_ADDRESS.match(config.parent.name)
            ):
                data = config.read_bytes()
                cardbus = len(data) > 0x0E and data[0x0E] & 0x7F == 2
                config.write_bytes(data[: 128 if cardbus else 64])


def agent_config(pod: PodSpec, **overrides: Any) -> Any:
    """The agent's Config from the container's args and env, as ``nfd-gpu run`` loads it."""
    from nfd_gpu.config import loader as config

    flags: dict[str, Any] = {}
    for a in pod.args:
        name, eq, value = a[2:].partition("=")
        key = {"output": "outputs", "profile": "profiles"}.get(name, name.replace("-", "_"))
        flags[key] = value if eq else True
    env = {k: v for k, v in pod.env.items() if k.startswith("NFD_GPU_") or k in config.STANDARD_ENV}
    cfg = config.load(None, env=env, flags=flags)
    return dataclasses.replace(cfg, **overrides)


def container_path(path: str, container_root: Path, images: dict[str, Path]) -> str:
    """A path the agent is given (``--rules``), as this machine finds it."""
    for cdir, repo in images.items():
        if path == cdir or path.startswith(cdir + "/"):
            return os.fspath(repo / path[len(cdir) :].lstrip("/"))
    return os.fspath(container_root / path.lstrip("/"))
