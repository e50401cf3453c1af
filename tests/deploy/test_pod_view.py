"""The labels a DaemonSet pod publishes equal the labels of a scan of the whole host.

For every distinct rendered DaemonSet (the overlays and every subset of the kustomize
components, deduplicated by what decides the pod's view: mounts, args, env, NVML; the Helm
matrix is checked to render one of those) and every fixture under ``tests/fixtures/sysfs``,
the pod's view of the fixture is built from the rendering's volume mounts alone
(``tests/deploy/podview.py``: only mounted host paths exist, at the container's mount
paths) and scanned with the settings the container gets (args, env, ``--root``,
``--rules`` from the image, profiles). The labels and the features nfd-gpu publishes must
equal those of a scan of the full fixture root with the same settings.

tests/node runs the DaemonSet as a real pod on a real kubelet for a few fixtures; this
simulation stays for what the real one cannot go to here: every fixture and rendering
cheaply, NVML in the pod (the nvml overlay's NVIDIA container runtime) and ``/dev``.

Facts a pod cannot have are named in :data:`UNAVAILABLE` (tests/deploy/losses.py), each
with the host paths it needs, why they are not mounted, and the labels it may cost
(docs/install.md says the same). For them the test is as strict: the pod's labels must
equal a scan of the full root with exactly those paths removed, and every entry must
matter for some fixture.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.features import owned
from tests.deploy import podview, renderings
from tests.deploy.losses import UNAVAILABLE
from tests.deploy.test_manifests import OVERLAYS, REPO, render

FIXTURES = REPO / "tests" / "fixtures" / "sysfs"


def _view_key(pod: podview.PodSpec) -> tuple[Any, ...]:
    """What decides the pod's view and settings, independent of list order."""
    return (tuple(sorted(pod.mounts, key=repr)), pod.args, tuple(sorted(pod.env.items())), pod.nvml)


def _distinct_renderings() -> dict[str, list[dict[str, Any]]]:
    import tempfile

    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[Any, ...]] = set()
    cands = [(f"overlay:{o}", render(o)) for o in OVERLAYS]
    with tempfile.TemporaryDirectory() as d:
        for i, sub in enumerate(renderings.SUBSETS):
            objs = renderings.render_subset(sub, Path(d) / str(i))
            cands.append(("components:" + ("+".join(sub) or "base"), objs))
    for name, objs in cands:
        key = _view_key(podview.pod_spec(objs))
        if key not in seen:
            seen.add(key)
            out[name] = objs
    return out


RENDERINGS = _distinct_renderings()
ALL_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


_SCANS: dict[str, tuple[dict[str, str], dict[str, Any]]] = {}


def _scan(cfg: Any, *, shared: bool = False) -> tuple[dict[str, str], dict[str, Any]]:
    """One agent's first pass. ``shared``: the root is a tree no test changes (a fixture, or
    a ``stripped`` copy), so the scan with these settings is made once per module and
    each case compares against that same result (the 16 renderings share a few settings)."""
    key = repr(cfg)
    if shared and key in _SCANS:
        return _SCANS[key]
    agent = Agent(cfg, sinks=[])
    try:
        res = agent.scan()
    finally:
        if agent.health.watcher is not None:  # the XID watcher a recording's GPUs started
            agent.health.watcher.stop(timeout=0)  # ends after its wait, not with the process
    out = dict(res.labels), owned(res.features)
    if shared:
        _SCANS[key] = out
    return out


@pytest.fixture(scope="module")
def stripped(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, list[str]], Path]:
    """:func:`_strip` of a fixture, made once per (fixture, globs) for the module's cases
    (none writes to it)."""
    where = tmp_path_factory.mktemp("stripped")
    made: dict[tuple[str, tuple[str, ...]], Path] = {}

    def get(host: Path, globs: list[str]) -> Path:
        key = (host.name, tuple(sorted(set(globs))))
        if key not in made:
            made[key] = _strip(host, where / str(len(made)), list(key[1]))
        return made[key]

    return get


def _strip(src: Path, dst: Path, globs: list[str]) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(dst).as_posix()
            if any(fnmatch.fnmatchcase(rel, g) for g in globs) and (p.exists() or p.is_symlink()):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
    return dst


def _matches(key: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(key, g) for g in globs)


def test_renderings_cover_every_component_setting() -> None:
    """nvml, compat, worker-sidecar and host-runtime-config change the pod (16
    combinations); monitoring and gpu-nodes-only do not."""
    assert len(RENDERINGS) == 16, sorted(RENDERINGS)


@pytest.mark.parametrize("case", [c for c in renderings.HELM_MATRIX if c != "everything"])
def test_helm_pod_view_is_a_tested_rendering(case: str, tmp_path: Path) -> None:
    """Each Helm matrix case gives the agent one of the views tested below (the
    ``everything`` case mounts its rules from a ConfigMap, which the view does not model)."""
    objs = renderings.helm_template(renderings.HELM_MATRIX[case][0], tmp_path)
    tested = {_view_key(podview.pod_spec(o)) for o in RENDERINGS.values()}
    assert _view_key(podview.pod_spec(objs)) in tested


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_pod_labels_equal_host_labels(
    rendering: str, fixture: str, tmp_path: Path, stripped: Callable[[Path, list[str]], Path]
) -> None:
    pod = podview.pod_spec(RENDERINGS[rendering])
    for m in pod.mounts:
        if m.container_path.startswith("/host"):
            assert m.read_only, m
    host = FIXTURES / fixture
    croot = tmp_path / "container"
    podview.build(host, pod, croot)
    images = podview.image_copies(REPO / "Dockerfile")
    cfg = podview.agent_config(pod)
    rules = podview.container_path(cfg.rules, croot, images) if cfg.rules else None
    root_in_pod = Path(podview.container_path(cfg.root, croot, {}))
    if pod.nvml and (host / podview.NVML_RECORDING).is_file():
        # NVML answers in the container: the recording stands for it.
        shutil.copy2(host / podview.NVML_RECORDING, root_in_pod / podview.NVML_RECORDING)

    in_pod = _scan(podview.agent_config(pod, root=str(root_in_pod), rules=rules))
    full = _scan(podview.agent_config(pod, root=str(host), rules=rules), shared=True)

    missing = {n: u for n, u in UNAVAILABLE.items() if u.applies(pod)}
    globs = [g for u in missing.values() for g in u.paths]
    reduced_root = stripped(host, globs)
    reduced = _scan(podview.agent_config(pod, root=str(reduced_root), rules=rules), shared=True)
    # The pod sees exactly the host minus the named facts ...
    assert in_pod[0] == reduced[0]
    assert in_pod[1] == reduced[1]
    # ... and those cost only the labels they name.
    changed = {k for k in set(full[0]) | set(reduced[0]) if full[0].get(k) != reduced[0].get(k)}
    for k in changed:
        why = [n for n, u in missing.items() if _matches(k, u.labels)]
        assert why, f"{k}: {full[0].get(k)!r} on the host, {reduced[0].get(k)!r} in the pod"
    if not missing:
        assert in_pod == full


LEVEL_ZERO = "gpu.feature.node.kubernetes.io/runtime.level-zero"
TOOLKIT = "gpu.feature.node.kubernetes.io/runtime.nvidia-container-toolkit"


@pytest.mark.parametrize(
    ("planted", "label"),
    [
        ("usr/lib64/libze_loader.so.1", LEVEL_ZERO),
        ("usr/local/lib/libze_loader.so.1", LEVEL_ZERO),
        ("usr/bin/nvidia-ctk", TOOLKIT),
    ],
)
@pytest.mark.parametrize("rendering", ["overlay:nodefeature-api", "components:host-runtime-config"])
def test_usr_outside_the_mounts_costs_only_its_label(
    planted: str, label: str, rendering: str, tmp_path: Path
) -> None:
    """The /usr narrowing's trade-off (docs/install.md), measured: no fixture has a Level
    Zero loader in /usr/lib64 or /usr/local/lib or an NVIDIA runtime binary in /usr/bin, so
    one is planted in max1550-xe (its loader moved out of /usr/lib): the pod loses exactly
    that label, and sees everything else as before."""
    host = tmp_path / "host"
    shutil.copytree(FIXTURES / "max1550-xe", host, symlinks=True)
    (host / "usr/lib/x86_64-linux-gnu/libze_loader.so.1").unlink()
    (host / planted).parent.mkdir(parents=True, exist_ok=True)
    (host / planted).write_bytes(b"")
    pod = podview.pod_spec(RENDERINGS[rendering])
    croot = tmp_path / "container"
    podview.build(host, pod, croot)
    rules = None
    in_pod = _scan(podview.agent_config(pod, root=str(croot / "host"), rules=rules))[0]
    globs = [g for u in UNAVAILABLE.values() if u.applies(pod) for g in u.paths]
    reduced = _scan(
        podview.agent_config(pod, root=str(_strip(host, tmp_path / "r", globs)), rules=rules)
    )[0]
    assert reduced.get(label) == "true"  # the host has it ...
    assert label not in in_pod  # ... the pod does not
    assert in_pod == {k: v for k, v in reduced.items() if k != label}


@pytest.mark.parametrize("name", sorted(UNAVAILABLE))
def test_unavailable_fact_matters_and_is_documented(
    name: str, stripped: Callable[[Path, list[str]], Path]
) -> None:
    """Each entry costs one of its labels on some fixture (else it is stale), and
    docs/install.md names its paths."""
    u = UNAVAILABLE[name]
    install = (REPO / "docs" / "install.md").read_text()
    for p in u.paths:
        assert f"`{p}`" in install or f"`/{p}`" in install, (name, p)
    pods = [podview.pod_spec(o) for o in RENDERINGS.values()]
    # the overlay with the most profiles among those the entry applies to
    pod = max(
        (p for p in pods if u.applies(p)), key=lambda p: len(podview.agent_config(p).profiles)
    )
    cost: set[str] = set()
    for fixture in ALL_FIXTURES:
        host = FIXTURES / fixture
        if not any(any(host.glob(g)) for g in u.paths):
            continue
        full = _scan(podview.agent_config(pod, root=str(host), rules=None), shared=True)[0]
        less_root = stripped(host, list(u.paths))
        less = _scan(podview.agent_config(pod, root=str(less_root), rules=None), shared=True)[0]
        cost |= {k for k in set(full) | set(less) if full.get(k) != less.get(k)}
    assert cost, f"{name}: no fixture loses a label without {u.paths}: drop the entry"
    assert all(_matches(k, u.labels) for k in cost), cost


def test_pod_view_is_not_the_host(tmp_path: Path) -> None:
    """The builder leaves out what is not mounted (the comparison above is not vacuous)."""
    host = FIXTURES / "max1550-xe"
    for name, objs in RENDERINGS.items():
        pod = podview.pod_spec(objs)
        croot = tmp_path / name.replace(":", "_")
        podview.build(host, pod, croot)
        view = {p.relative_to(croot / "host").as_posix() for p in (croot / "host").rglob("*")}
        full = {p.relative_to(host).as_posix() for p in host.rglob("*")}
        assert "sys/bus/pci/devices" in view and "proc/driver" in view
        assert "proc/modules" not in view and "sys/module/xe/initstate" in view
        assert not any(v.startswith(("dev", "opt")) for v in view), name
        assert any(f.startswith("dev/") for f in full)
        # nothing that is not the host's, except the (empty) mount points and their parents
        points = {m.container_path.removeprefix("/host/") for m in pod.mounts}
        points |= {str(Path(p).parent) for p in points} | {
            str(Path(p).parent.parent) for p in points
        }
        assert view - full <= points, view - full
        assert len(view) < len(full)


def test_pod_reads_64_config_bytes(tmp_path: Path) -> None:
    """No overlay gives CAP_SYS_ADMIN: the pod reads the first 64 bytes of config space
    (the real H200's 4 KiB one included), and a privileged container would read it all."""
    rel = "sys/devices/pci0000:00/0000:00:06.0/config"
    host = FIXTURES / "h200-vm"
    assert (host / rel).stat().st_size == 4096
    for overlay in OVERLAYS:
        pod = podview.pod_spec(render(overlay))
        assert not pod.sys_admin, overlay
        croot = tmp_path / overlay
        podview.build(host, pod, croot)
        assert (croot / "host" / rel).read_bytes() == (host / rel).read_bytes()[:64]
    objs = render(OVERLAYS[0])
    ds = podview.daemonset(objs)
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    pod = podview.pod_spec(objs)
    assert pod.sys_admin
    podview.build(host, pod, tmp_path / "privileged")
    assert (tmp_path / "privileged" / "host" / rel).stat().st_size == 4096
