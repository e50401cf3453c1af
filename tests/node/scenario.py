"""One install of nfd-gpu on the real node, as a user does it, and what it gives.

:class:`Install` applies the nodefeature-api overlay (kustomize, rendered by
tests/deploy/kustomize.py) or installs the Helm chart (``helm install`` with a
post-renderer), with only the fixture's host paths swapped in (tests/node/hostpaths.py);
``uninstall`` removes it again and waits for the Node to lose the agent's labels.
:func:`label_node` has NFD's nfd-worker (pci source, one pass over the fixture) label the
node, as it would on that host: the DaemonSet's node affinity reads those labels.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.deploy import kustomize
from tests.deploy.renderings import CHART, tool
from tests.e2e.cluster import ApiError, Cluster, Obj, object_path
from tests.e2e.conftest import NFD_NAMESPACE, wait_for
from tests.e2e.test_cluster import run_nfd_worker
from tests.node import hostpaths
from tests.node.node import Node

FIXTURES = REPO / "tests" / "fixtures" / "sysfs"
NF = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{ns}/nodefeatures/{name}"


def label_node(cluster: Cluster, node: Node, fixture: str, work: Path) -> dict[str, str]:
    """nfd-worker's pci labels of ``fixture`` on ``node`` (through nfd-master); returns
    them once the Node has them."""
    work.mkdir(parents=True, exist_ok=True)
    link = work / "host-sys"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(FIXTURES / fixture / "sys")
    worker = run_nfd_worker(cluster, node.name, work, "pci", label_sources="pci")
    assert worker.returncode == 0, worker.stderr[-3000:]
    nf = cluster.request("GET", NF.format(ns=NFD_NAMESPACE, name=node.name))
    want: dict[str, str] = nf["spec"].get("labels", {})

    def labelled() -> bool:
        have = node_labels(cluster, node)
        pci = {k: v for k, v in have.items() if k.startswith("feature.node.kubernetes.io/pci-")}
        return pci == want

    wait_for(labelled, 30, lambda: f"nfd-worker labels {want} not on the Node")
    return want


def node_labels(cluster: Cluster, node: Node) -> dict[str, str]:
    got: dict[str, str] = cluster.request("GET", f"/api/v1/nodes/{node.name}")["metadata"]["labels"]
    return got


def direct_scan(fixture: str) -> dict[str, str]:
    """``nfd-gpu scan`` of the whole fixture with the image's rules (the pod's --rules)."""
    out = subprocess.run(
        [sys.executable, "-m", "nfd_gpu.cli", "scan", "--root", str(FIXTURES / fixture),
         "--rules", str(REPO / "rules"), "-f", "json"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    labels: dict[str, str] = json.loads(out.stdout)["labels"]
    return labels


@dataclass
class Install:
    """nfd-gpu installed by ``how`` ("kustomize" or "helm") for ``fixture``."""

    cluster: Cluster
    node: Node
    how: str
    fixture: str
    work: Path
    namespace: str = "nfd-gpu"
    objects: list[Obj] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    # kustomize only: a test's own change to the objects after the host paths (say why)
    patch: Callable[[list[Obj]], None] | None = None

    def install(self, values: dict[str, Any] | None = None) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        if self.how == "kustomize":
            objs = kustomize.build(REPO / "deploy" / "overlays" / "nodefeature-api")
            self.paths = hostpaths.mapping(FIXTURES / self.fixture, self.work / "empty", objs)
            self.objects = hostpaths.swap(objs, self.paths)
            if self.patch is not None:
                self.patch(self.objects)
            for obj in sorted(self.objects, key=lambda o: o["kind"] != "Namespace"):
                self.cluster.apply(obj)
        else:
            self.namespace = "nfd-gpu-helm"
            self.helm("install", values)

    def helm(self, verb: str, values: dict[str, Any] | None = None) -> None:
        """``helm install`` or ``helm upgrade`` of the chart with ``values``."""
        if not self.paths:
            out = self._helm("template", values)
            objs = [d for d in __import__("yaml").safe_load_all(out) if d]
            self.paths = hostpaths.mapping(FIXTURES / self.fixture, self.work / "empty", objs)
        self._helm(verb, values, "--create-namespace" if verb == "install" else "--reuse-values")

    def _helm(self, verb: str, values: dict[str, Any] | None, *extra: str) -> str:
        import yaml

        vf = self.work / "values.yaml"
        vf.write_text(yaml.safe_dump(values or {}))
        renderer = self.work / "post-render"
        renderer.write_text(
            f"#!/bin/sh\nexec {sys.executable} {REPO / 'tests/node/hostpaths.py'}\n"
        )
        renderer.chmod(0o755)
        args = [tool("helm"), verb, "nfd-gpu", str(CHART), "-n", self.namespace, "-f", str(vf)]
        if verb != "template":
            args += [
                "--kubeconfig",
                str(self.cluster.admin_kubeconfig),
                "--post-renderer",
                str(renderer),
            ]
        env = {**os.environ, hostpaths.ENV: json.dumps(self.paths)}
        r = subprocess.run([*args, *extra], capture_output=True, text=True, env=env, timeout=180)
        assert r.returncode == 0, f"helm {verb}: {r.stderr}"
        return r.stdout

    def pods(self) -> list[Obj]:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        got: list[Obj] = self.cluster.request("GET", path)["items"]
        return [p for p in got if p["metadata"].get("deletionTimestamp") is None]

    def ready_pod(self, timeout: float = 120) -> Obj:
        """The agent's pod once Ready (its time from install is ``self.ready_s``)."""

        def ready() -> Obj | None:
            for p in self.pods():
                conds = {
                    c["type"]: c["status"] for c in p.get("status", {}).get("conditions") or []
                }
                if conds.get("Ready") == "True":
                    return p
            return None

        pod: Obj = wait_for(
            ready, timeout, lambda: json.dumps([p.get("status") for p in self.pods()])[-3000:]
        )
        self.ready_s = time.monotonic() - self.started
        return pod

    def nodefeature(self) -> Obj | None:
        with contextlib.suppress(ApiError):
            got: Obj = self.cluster.request(
                "GET", NF.format(ns=self.namespace, name=f"nfd-gpu-{self.node.name}")
            )
            return got
        return None

    def uninstall(self, agent_keys: set[str]) -> None:
        if self.how == "kustomize":
            for obj in reversed(self.objects):
                if obj["kind"] != "Namespace":
                    with contextlib.suppress(ApiError):
                        self.cluster.request("DELETE", object_path(obj))
        else:
            r = subprocess.run(
                [tool("helm"), "uninstall", "nfd-gpu", "-n", self.namespace, "--kubeconfig",
                 str(self.cluster.admin_kubeconfig), "--wait"],
                capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr
        wait_for(lambda: not self.pods(), 60, lambda: "agent pods left")
        nf = self.nodefeature()
        if nf is not None:  # the agent removes it only with --remove-on-exit (featurefile)
            self.cluster.request(
                "DELETE", NF.format(ns=self.namespace, name=nf["metadata"]["name"])
            )
        wait_for(
            lambda: not agent_keys & set(node_labels(self.cluster, self.node)),
            60,
            lambda: "the agent's labels stay on the Node",
        )
