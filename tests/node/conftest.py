"""Fixtures for tests/node: a real node (tests/node/node.py) on tests/e2e's control plane.

``control_plane`` (session): etcd + kube-apiserver (Node,RBAC authorization,
NodeRestriction) with NFD's CRDs, and nfd-master. ``node`` (session): the kubelet,
containerd, kube-controller-manager and kube-scheduler, with the pause image and the
project's image imported; at its end the host must be as :func:`host_state` found it
before the node started (a teardown error names what changed). Without the components
(``bash tests/node/build.sh``, Debian's containerd, runc and containernetworking-plugins,
the image from ``image/build.sh``) the tests skip locally and FAIL in CI.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.e2e.cluster import BIN as E2E_BIN
from tests.e2e.cluster import Cluster, load_yaml_docs
from tests.e2e.cluster import missing_components as e2e_missing
from tests.e2e.conftest import NFD_CRDS, NFD_NAMESPACE, Proc, start_nfd_master
from tests.node import node as realnode
from tests.node.hoststate import differences, host_state

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
IMAGE_REPO = "ghcr.io/nfd-gpu/nfd-gpu"


def image_archive() -> Path:
    """The OCI archive image/build.sh wrote for this machine's architecture."""
    from nfd_gpu import __version__

    return REPO / "build" / "image" / f"nfd-gpu-{__version__}-linux-{ARCH}.oci.tar"


def image_ref() -> str:
    """What deploy/ and the chart name: the chart's appVersion as the tag."""
    from nfd_gpu import __version__

    return f"{IMAGE_REPO}:v{__version__}"


def _require() -> None:
    missing = e2e_missing() + realnode.missing_components()
    if os.geteuid() != 0:
        missing.append("root (namespaces, mounts, cgroups)")
    if not image_archive().exists():
        missing.append(f"{image_archive()} (bash image/build.sh)")
    if not missing:
        return
    msg = f"real-node components missing (bash tests/node/build.sh etc.): {', '.join(missing)}"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    _require()
    # the kubelet's own version: a kubelet newer than its API server is outside Kubernetes'
    # version skew policy (v1.37's node status fields are unknown to tests/e2e's v1.35)
    cluster = Cluster(
        tmp_path_factory.mktemp("cluster"),
        node_authorizer=True,
        apiserver=realnode.BIN / "kube-apiserver",
    )
    try:
        cluster.start()
        for crd in load_yaml_docs(E2E_BIN / "nfd-api-crds.yaml"):
            cluster.apply(crd)
        cluster.wait_crds(NFD_CRDS)
        cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NFD_NAMESPACE}}
        )
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def nfd_master(control_plane: Cluster) -> Iterator[Proc]:
    master = start_nfd_master(control_plane)
    try:
        yield master
    finally:
        master.stop()


@pytest.fixture(scope="session")
def node(
    control_plane: Cluster, nfd_master: Proc, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[realnode.Node]:
    before = host_state()
    n = realnode.Node(tmp_path_factory.mktemp("node"), control_plane)
    images = [
        (realnode.BIN / "pause.oci.tar", realnode.pause_ref()),
        (image_archive(), image_ref()),
    ]
    n.start(images)
    print(f"\nreal node up: {', '.join(f'{k} {v:.1f} s' for k, v in n.timings.items())}")
    try:
        yield n
    finally:
        n.stop()
        changed = differences(before, host_state())
        print(
            f"\nreal node down in {n.timings['teardown']:.1f} s; host changes: {changed or 'none'}"
        )
        assert not changed, "the real node changed the host:\n" + "\n".join(changed)
        assert not n.cgroup_pids() and not n.our_pids(), "processes left behind"


REPORTS: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep what a real-node test printed: per scenario its Ready time, labels, findings
    (the teardown's report holds the output of all three phases)."""
    if report.when == "teardown" and report.capstdout.strip():
        REPORTS.append(f"{report.nodeid}:{report.capstdout.rstrip()}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print those reports at the end of the run, where a CI log shows them."""
    if REPORTS:
        terminalreporter.section("real node: what each scenario reported")
        for line in REPORTS:
            terminalreporter.write_line(line)
