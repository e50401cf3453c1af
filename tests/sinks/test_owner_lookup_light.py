"""The DaemonSet owner lookup reads the agent's own Pod without kubernetes' generated
``CoreV1Api`` / ``AppsV1Api`` modules (kubernetes >= 35 builds pydantic validators for a
whole API class on import: 11-16 MB of RSS against the deployment's 80Mi request).

Runs in a fresh interpreter: other tests in this process may have imported those modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys
import kubernetes
from tests.k8s_api_server import FakeKubeAPI
from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.nodefeature import NodeFeatureSink

api = FakeKubeAPI().start()
ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "ds-1"}
api.add_pod("nfd-gpu", "nfd-gpu-x1", "pod-1", [ds])
cfg = kubernetes.client.Configuration()
cfg.host = api.url
cfg.retries = 0
sink = NodeFeatureSink(node_name="n1", namespace="nfd-gpu", pod_name="nfd-gpu-x1",
                       pod_uid="pod-1", api_client=kubernetes.client.ApiClient(cfg))
sink.publish(Publication({"nvidia.com/gpu.present": "true"}))
obj = api.get("nfd-gpu", "nfd-gpu-n1")
api.stop()
print(json.dumps({
    "refs": [(r["kind"], r["name"], r["uid"]) for r in obj["metadata"]["ownerReferences"]],
    "counts": api.counts,
    "generated": sorted(m for m in sys.modules
                        if m in ("kubernetes.client.api.core_v1_api",
                                 "kubernetes.client.api.apps_v1_api")),
}))
"""


def test_owner_lookup_without_generated_core_api() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["refs"] == [["Pod", "nfd-gpu-x1", "pod-1"], ["DaemonSet", "nfd-gpu", "ds-1"]]
    assert got["counts"]["get-pod"] == 1
    assert got["generated"] == []
