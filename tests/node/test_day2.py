"""Day 2 on the real node: one Helm install (h200-mig-mixed) with a rules ConfigMap.

The chart as shipped, ``rules.files`` holding one ``InRegexp`` rule and ``interval`` 5 s;
the tests run in order on that install:

- the ``InRegexp`` rule's label is on the Node. Catches an image without google-re2 (built
  from c94e62b's ``image/requirements-amd64.txt`` this test fails: the rule's "regexp
  engine unavailable", the pod never Ready, the label never published);
- the rules ConfigMap edited to broken YAML: the Node's labels stay the same over three
  passes and ``/readyz`` names the file. Catches a broken file dropping its rules' labels
  (or all of them) instead of keeping the last valid version;
- the admission policy refuses a NodeFeature for another node created with the pod's own
  projected service-account token (read from the kubelet's pod volume on the node), while
  the same token reads the pod's own object. Catches a policy that trusts the object's
  name or label instead of the token's node claim;
- ``helm upgrade`` with a config change (``interval``) rolls the pod, and every poll of the
  Node's labels during the roll has all the agent's labels. Catches a roll that removes the
  NodeFeature (or publishes an empty one) between the old pod's end and the new one's first
  pass;
- a ``change`` uevent of one of this machine's PCI devices, written on the host, makes the
  upgraded pod (interval 300 s) pass again within its debounce (plus slack for this loaded
  machine). Catches a netlink socket in the pod's network namespace that hears nothing: the
  kernel sends untagged (pci, drm) uevents to every network namespace of the initial user
  namespace, so hostNetwork is not needed (a user-namespaced pod would hear none).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import ApiError, Cluster
from tests.e2e.conftest import wait_for
from tests.node.node import Node
from tests.node.scenario import NF, Install, label_node, node_labels

FIXTURE = "h200-mig-mixed"
REGEXP_LABEL = "gpu.feature.node.kubernetes.io/nvidia-by-regexp"
REGEXP_RULES = f"""\
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: regexp
spec:
  rules:
    - name: nvidia-by-regexp
      labels:
        {REGEXP_LABEL}: "true"
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            vendor: {{op: InRegexp, value: ["^nvid"]}}
"""
INTERVAL = 5
VALUES = {"interval": INTERVAL, "rules": {"files": {"regexp.yaml": REGEXP_RULES}}}
# the upgrade: a timer too long to explain a pass, and debug logs (the udev event's line)
UPGRADED = {**VALUES, "interval": 300, "logLevel": "debug"}
DEBOUNCE = 2.0  # the agent's default udev_debounce


@pytest.fixture(scope="module")
def inst(
    control_plane: Cluster, node: Node, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Install]:
    work = tmp_path_factory.mktemp("day2")
    label_node(control_plane, node, FIXTURE, work / "nfd-worker")
    i = Install(control_plane, node, "helm", FIXTURE, work / "install")
    i.install(VALUES)
    try:
        yield i
    finally:
        nf = i.nodefeature()
        i.uninstall(set(nf["spec"].get("labels", {})) if nf else {REGEXP_LABEL})


def _agent_labels(inst: Install) -> dict[str, str]:
    nf = inst.nodefeature()
    assert nf is not None, "no NodeFeature published"
    labels: dict[str, str] = nf["spec"].get("labels", {})
    return labels


def _pod_log(node: Node, inst: Install) -> str:
    logs = sorted((node.workdir / "pod-logs").glob(f"{inst.namespace}_*/nfd-gpu/*.log"))
    return "\n".join(f.read_text(errors="replace")[-3000:] for f in logs)


def _readyz(node: Node, inst: Install) -> str:
    ip = inst.ready_pod()["status"]["podIP"]
    return node.sh(f"curl -s http://{ip}:8081/readyz")


def test_inregexp_rule_label_on_the_node(control_plane: Cluster, node: Node, inst: Install) -> None:
    try:
        inst.ready_pod(60)
    except AssertionError as e:
        raise AssertionError(f"{e}\npod log:\n{_pod_log(node, inst)}") from None
    wait_for(
        lambda: node_labels(control_plane, node).get(REGEXP_LABEL) == "true",
        60,
        lambda: f"{REGEXP_LABEL} not on the Node; NodeFeature: {json.dumps(inst.nodefeature())}",
    )
    print(f"\npod Ready {inst.ready_s:.1f} s after install; {REGEXP_LABEL}=true on the Node")


def test_broken_rules_configmap_keeps_the_labels(
    control_plane: Cluster, node: Node, inst: Install
) -> None:
    wait_for(lambda: REGEXP_LABEL in _agent_labels(inst), 60, lambda: "no regexp label")
    before = node_labels(control_plane, node)
    path = f"/api/v1/namespaces/{inst.namespace}/configmaps/nfd-gpu-rules"
    cm = control_plane.request("GET", path)
    cm["data"] = {"regexp.yaml": "spec: [unclosed\n"}
    control_plane.request("PUT", path, cm)
    t0 = time.monotonic()
    body = wait_for(
        lambda: b if "regexp.yaml" in (b := _readyz(node, inst)) else None,
        90,
        lambda: f"/readyz does not name the broken file: {_readyz(node, inst)!r}",
    )
    seen = time.monotonic() - t0
    for _ in range(3):  # three passes on the broken file
        time.sleep(INTERVAL)
        assert node_labels(control_plane, node) == before
    print(f"\nbroken rules seen {seen:.1f} s after the edit; labels kept; /readyz: {body.strip()}")


def test_admission_refuses_another_nodes_object_with_the_pods_token(
    control_plane: Cluster, node: Node, inst: Install
) -> None:
    pod = inst.ready_pod()
    vols = node.workdir / "kubelet" / "pods" / pod["metadata"]["uid"] / "volumes"
    # the projected volume is a tmpfs the kubelet mounted in the node's mount namespace
    token = node.sh(f"cat {vols}/kubernetes.io~projected/kube-api-access-*/token")
    own = NF.format(ns=inst.namespace, name=f"nfd-gpu-{node.name}")
    assert control_plane.request("GET", own, token=token)["metadata"]["name"]  # the token works
    other = "node-1"
    obj = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"nfd-gpu-{other}",
            "namespace": inst.namespace,
            "labels": {"nfd.node.kubernetes.io/node-name": other},
        },
        "spec": {"labels": {"gpu.feature.node.kubernetes.io/present": "true"}},
    }
    with pytest.raises(ApiError) as refused:
        control_plane.request("POST", own.rsplit("/", 1)[0], obj, token=token)
    print(f"\nanother node's NodeFeature with the pod's own token: {refused.value}")
    assert refused.value.status in (403, 422), refused.value
    assert "ValidatingAdmissionPolicy" in str(refused.value), refused.value


def test_helm_upgrade_rolls_without_losing_a_label(
    control_plane: Cluster, node: Node, inst: Install
) -> None:
    old = inst.ready_pod()["metadata"]["uid"]
    want = _agent_labels(inst)
    assert REGEXP_LABEL in want
    t0 = time.monotonic()
    inst.helm("upgrade", UPGRADED)
    polls, lost = 0, []

    def rolled() -> bool:
        nonlocal polls
        have = node_labels(control_plane, node)
        polls += 1
        lost.extend(k for k in want if have.get(k) != want[k])
        pods = inst.pods()
        return bool(pods) and all(p["metadata"]["uid"] != old for p in pods) and _ready(pods)

    wait_for(rolled, 120, lambda: f"no new Ready pod; pods: {[p['status'] for p in inst.pods()]}")
    took = time.monotonic() - t0
    print(
        f"\nrolled in {took:.1f} s; {polls} polls of the Node's labels; lost: {sorted(set(lost))}"
    )
    assert not lost
    assert _agent_labels(inst) == want


def _ready(pods: list[dict[str, object]]) -> bool:
    for p in pods:
        conds = p.get("status", {}).get("conditions") or []  # type: ignore[union-attr]
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
            return False
    return True


def _scans(node: Node, inst: Install) -> float:
    ip = inst.ready_pod()["status"]["podIP"]
    text = node.sh(f"curl -s http://{ip}:8081/metrics")
    return sum(
        float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith("nfd_gpu_scans_total{")
    )


def test_host_uevent_makes_the_pod_rescan(node: Node, inst: Install) -> None:
    before = _scans(node, inst)
    dev = sorted(Path("/sys/bus/pci/devices").iterdir())[0]  # this machine's own device
    t0 = time.monotonic()
    (dev / "uevent").write_text("change")
    wait_for(
        lambda: _scans(node, inst) > before,
        DEBOUNCE + 10,
        lambda: f"no pass after a change uevent of {dev.name}; pod log:\n{_pod_log(node, inst)}",
    )
    took = time.monotonic() - t0
    heard = "udev change event on pci" in _pod_log(node, inst)
    print(f"\nchange uevent of {dev.name}: a pass {took:.1f} s later; logged: {heard}")
    assert heard
