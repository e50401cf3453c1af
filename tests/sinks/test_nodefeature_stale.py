"""The stale-NodeFeature removal (``nfd_gpu/sinks/nodefeature_stale.py``) over real HTTP
(tests/k8s_api_server.py): its requests run in a child process, so the agent that calls it
(no ``nodefeature`` output) never imports the Kubernetes client; the child's lines are the
agent's own. The real kube-apiserver's side is tests/e2e/test_stale_nodefeature.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from nfd_gpu.config.loader import Config
from nfd_gpu.sinks.kubeclient import NODE_NAME_LABEL
from nfd_gpu.sinks.nodefeature_stale import remove_stale
from tests.conftest import REPO
from tests.k8s_api_server import FakeKubeAPI, running

NS = "nfd-gpu"


def _stale(api: FakeKubeAPI, node: str, label_node: str) -> None:
    api.objects[(NS, f"nfd-gpu-{node}")] = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"nfd-gpu-{node}",
            "namespace": NS,
            "uid": "uid-1",
            "resourceVersion": "1",
            "labels": {NODE_NAME_LABEL: label_node},
        },
        "spec": {"labels": {"gpu.feature.node.kubernetes.io/present": "true"}},
    }


CHILD = """
import json, logging, sys
from nfd_gpu.config.loader import Config
from nfd_gpu.sinks.nodefeature_stale import remove_stale
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
remove_stale(Config(outputs=("featurefile",), node_name="n1", namespace=sys.argv[2],
                    kubeconfig=sys.argv[1]))
print(json.dumps("kubernetes" in sys.modules))
"""


def test_removed_without_importing_the_client(tmp_path: Path) -> None:
    with running() as api:
        _stale(api, "n1", "n1")
        kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
        p = subprocess.run(
            [sys.executable, "-c", CHILD, kubeconfig, NS],
            capture_output=True, text=True, cwd=REPO, timeout=120, check=True,
        )  # fmt: skip
        assert (NS, "nfd-gpu-n1") not in api.objects, p.stderr
    assert json.loads(p.stdout) is False
    assert "removed NodeFeature nfd-gpu/nfd-gpu-n1" in p.stderr


def test_the_childs_lines_are_the_agents(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with running() as api:
        _stale(api, "n1", "other-node")
        cfg = Config(
            outputs=("featurefile",),
            node_name="n1",
            namespace=NS,
            kubeconfig=api.kubeconfig(str(tmp_path / "kubeconfig")),
        )
        with caplog.at_level(logging.DEBUG, logger="nfd_gpu.agent"):
            remove_stale(cfg)
        assert (NS, "nfd-gpu-n1") in api.objects
        del api.objects[(NS, "nfd-gpu-n1")]
        with caplog.at_level(logging.DEBUG, logger="nfd_gpu.agent"):
            remove_stale(cfg)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "nfd_gpu.agent"]
    assert lines == [
        (
            logging.WARNING,
            f"NodeFeature {NS}/nfd-gpu-n1: no {NODE_NAME_LABEL}=n1 label, not ours: left",
        ),
        (logging.DEBUG, f"NodeFeature {NS}/nfd-gpu-n1: none (nothing stale)"),
    ]


def test_a_failed_child_is_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [not a mapping\n")
    cfg = Config(outputs=("featurefile",), node_name="n1", namespace=NS, kubeconfig=str(bad))
    with caplog.at_level(logging.DEBUG, logger="nfd_gpu.agent"):
        remove_stale(cfg)
    lines = [r.getMessage() for r in caplog.records if r.name == "nfd_gpu.agent"]
    assert len(lines) == 1
    assert lines[0].startswith(f"NodeFeature {NS}/nfd-gpu-n1: not checked: {bad}: cannot load")
