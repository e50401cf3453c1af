"""The NodeFeature sink imports only the parts of the kubernetes client it uses
(``kubeclient.client_modules``): not the packages' ``__init__`` (``kubernetes`` imports
config, dynamic, watch, stream, utils, leaderelection and informer; ``kubernetes.utils``
the YAML creator), not a generated API class (pydantic validators for each method) and,
in a pod (in-cluster configuration), not the kubeconfig reader with requests-oauthlib nor
the client's ``ApiClient`` (pydantic): the requests go through its REST layer.
What ``benchmarks/agent.py`` measures as the NodeFeature agent's RSS.

Each case runs in a fresh interpreter: other tests in this process import the whole client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json, os, sys, tempfile
from tests.k8s_api_server import FakeKubeAPI
from nfd_gpu.sinks import Publication
from nfd_gpu.sinks.kubeclient import build_api_client, client_for, new_configuration
from nfd_gpu.sinks.nodefeature import NodeFeatureSink

api = FakeKubeAPI().start()
ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nfd-gpu", "uid": "ds-1"}
api.add_pod("nfd-gpu", "nfd-gpu-x1", "pod-1", [ds])
if sys.argv[1] == "kubeconfig":
    client = build_api_client(api.kubeconfig(os.path.join(tempfile.mkdtemp(), "kc")))
else:  # what load_incluster_config sets, with the in-cluster loader's imports
    cfg = new_configuration()
    cfg.host, cfg.retries = api.url, 0
    cfg.api_key["authorization"] = "bearer t"  # the key both client generations read
    client = client_for(cfg)
sink = NodeFeatureSink(node_name="n1", namespace="nfd-gpu", pod_name="nfd-gpu-x1",
                       pod_uid="pod-1", api_client=client, watch=True)
sink.publish(Publication({"nvidia.com/gpu.present": "true"}))
sink.publish(Publication({"nvidia.com/gpu.present": "false"}))
obj = api.get("nfd-gpu", "nfd-gpu-n1")
modules = sorted(sys.modules)
http2_init_ran = "inject_into_urllib3" in vars(sys.modules["urllib3.http2"])
mp_init_ran = "cpu_count" in vars(sys.modules["multiprocessing"])
pool_maxsize = client.configuration.connection_pool_maxsize
sink.close()
api.stop()
import kubernetes  # the whole package, for whoever asks for it later
print(json.dumps({
    "labels": obj["spec"]["labels"],
    "refs": [r["kind"] for r in obj["metadata"]["ownerReferences"]],
    "counts": api.counts,
    "auth": sorted(set(api.auth)),
    "modules": modules,
    "http2_init_ran": http2_init_ran,
    "mp_init_ran": mp_init_ran,
    "pool_maxsize": pool_maxsize,
    "cpus": __import__("multiprocessing").cpu_count() == os.cpu_count(),
    "later": [sys.modules["urllib3.http2"].inject_into_urllib3.__name__,
              kubernetes.__version__, kubernetes.watch.Watch.__name__,
              kubernetes.client.CustomObjectsApi.__name__,
              kubernetes.utils.create_from_yaml.__name__,
              kubernetes.config.load_kube_config.__name__],
}))
"""

NEVER = (
    "kubernetes.dynamic",
    "kubernetes.watch",
    "kubernetes.stream",
    "kubernetes.leaderelection",
    "kubernetes.informer",
    "kubernetes.utils.create_from_yaml",
    "kubernetes.client.api",  # the generated API classes
    "websocket",
)


def legacy_rest() -> bool:
    from nfd_gpu.sinks.kubeclient import client_modules
    from nfd_gpu.sinks.kubeclient import legacy_rest as legacy

    return legacy(client_modules().RESTClientObject)


def _run(how: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, how], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


@pytest.mark.parametrize("how", ["in-cluster", "kubeconfig"])
def test_the_sink_imports_only_what_it_uses(how: str) -> None:
    got = _run(how)
    assert got["labels"] == {"nvidia.com/gpu.present": "false"}
    assert got["refs"] == ["Pod", "DaemonSet"]
    counts = got["counts"]
    assert isinstance(counts, dict)
    assert counts["get-pod"] == 1 and counts["create"] == 1 and counts["patch"] == 1
    assert got["auth"] == (["Bearer test-token"] if how == "kubeconfig" else ["bearer t"])
    mods = got["modules"]
    assert isinstance(mods, list)
    if legacy_rest():
        # kubernetes < 35: the client package's __init__ imports every API class and model
        # itself, so there is nothing to leave out; the requests work all the same
        pytest.skip("kubernetes < 35 imports its whole client package")
    assert {"kubernetes.client.rest", "kubernetes.client.configuration"} <= set(mods)
    # urllib3's HTTP/2 package: its probe only, not its __init__ (importlib.metadata)
    assert "urllib3.http2.probe" in mods and got["http2_init_ran"] is False
    # multiprocessing, which the client's configuration imports for cpu_count() alone: the
    # pool's size is given, so its __init__ did not run (it runs on first use: "cpus")
    assert got["pool_maxsize"] == 4 and got["cpus"] is True
    if how == "in-cluster":  # the kubeconfig reader's ApiClient imports multiprocessing.pool
        assert got["mp_init_ran"] is False
    loaded = sorted(m for m in mods if m in NEVER or m.startswith(tuple(f"{n}." for n in NEVER)))
    assert loaded == []
    # the kubeconfig reader (requests-oauthlib; it imports the ApiClient, with pydantic):
    # only for a kubeconfig file, never in a pod
    kubeconfig_only = {"kubernetes.config.kube_config", "requests", "requests_oauthlib",
                       "kubernetes.client.api_client", "pydantic"}  # fmt: skip
    if how == "in-cluster":
        assert kubeconfig_only & set(mods) == set()
    else:
        assert "kubernetes.config.kube_config" in mods


def test_the_whole_package_is_still_there_for_who_asks() -> None:
    """A later ``import kubernetes`` gets the complete package (its ``__init__`` run on
    first use of anything but the modules already loaded)."""
    got = _run("in-cluster")
    assert got["later"][0] == "inject_into_urllib3"  # urllib3.http2's __init__, run on first use
    assert got["later"][2:] == [
        "Watch", "CustomObjectsApi", "create_from_yaml", "load_kube_config"
    ]  # fmt: skip
    assert got["later"][1]
