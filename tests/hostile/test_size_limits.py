"""Huge valid output (issue 34, finding 5).

Before: 7,000 valid rules put 7,024 labels and a 624 KB Node object on the node with
``/readyz`` 200; 10,000 got ``etcdserver: request is too large`` from the server, retried
as a transient failure for ever. Now: over ``MAX_LABELS`` labels or ``MAX_LABEL_BYTES``
nothing new is published (the last good labels stay), the reason names who set them and
``/readyz`` is 503; an object the server refuses as too large (etcd's message, 413) is not
sent again, and one over ``MAX_OBJECT_BYTES`` is not sent at all.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from nfd_gpu.agent import Agent
from nfd_gpu.agent.metrics import Metrics
from nfd_gpu.config import loader as config
from nfd_gpu.features import add_attributes, empty
from nfd_gpu.sinks import Publication, Sink, SinkError
from nfd_gpu.sinks.nodefeature import MAX_OBJECT_BYTES, NodeFeatureSink
from tests.conftest import REPO, fixture_root
from tests.hostile.test_api_faults import _until, running_agent
from tests.k8s_api_server import FakeKubeAPI

CLASS = "gpu.feature.node.kubernetes.io/class"


class Recorder(Sink):
    name = "recorder"

    def __init__(self) -> None:
        self.published: list[dict[str, str]] = []

    def publish(self, pub: Publication) -> bool:
        self.published.append(dict(pub.labels))
        return True


def _many_labels(n: int) -> str:
    labels = "\n".join(f"        example.com/label-{i:05d}: value-{i}" for i in range(n))
    return f"""apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: huge
spec:
  rules:
    - name: huge-output
      labels:
{labels}
      matchFeatures:
        - feature: gpu.node
          matchExpressions:
            memory-mib: {{op: Exists}}
"""


def test_too_many_labels_are_not_published(tmp_path: Path, bounded: None) -> None:
    rules = tmp_path / "rules.d"
    rules.mkdir()
    shutil.copy(REPO / "rules" / "gpu-class.yaml", rules)
    cfg = config.load(
        env={},
        flags={"root": str(fixture_root("hgx-h100")), "outputs": "hook", "rules": str(rules)},
    )
    rec, metrics = Recorder(), Metrics()
    agent = Agent(cfg, sinks=[rec], metrics=metrics)
    assert agent.run_pass()
    good = rec.published[-1]
    assert good[CLASS] == "large"
    (rules / "huge.yaml").write_text(_many_labels(7000))
    assert not agent.run_pass()
    assert rec.published[-1] == good  # the last good labels, not 7,000 more
    assert max(len(p) for p in rec.published) < 100
    code, body = metrics.readyz()
    assert code == 503, body
    assert b"more than a node may carry" in body and b"the rules set 7001" in body, body
    (rules / "huge.yaml").unlink()
    assert agent.run_pass()
    assert metrics.readyz() == (200, b"ok\n")


@pytest.mark.parametrize(
    "message",
    [
        "etcdserver: request is too large",
        # kube-apiserver's etcd client over 2 MiB (the real v1.35 control plane's answer,
        # tests/e2e/test_size_refusal.py); before: retried as a transient 500 every pass
        "rpc error: code = ResourceExhausted desc = trying to send message larger than max "
        "(3626726 vs. 2097152)",
    ],
    ids=["etcd", "grpc-limit"],
)
def test_request_too_large_is_not_retried(k8s_server: FakeKubeAPI, message: str) -> None:
    k8s_server.fail("create", 500, 10_000, message=message)
    with running_agent(k8s_server) as (agent, _):
        assert _until(lambda: k8s_server.counts["create"] >= 1, 5) < 5
        time.sleep(4.0)  # 4 passes at the 1 s interval
        creates = k8s_server.counts["create"]
        code, body = agent.metrics.readyz()
    assert creates == 1, dict(k8s_server.counts)
    assert code == 503 and b"too large" in body, body
    assert b"(the object: " in body and b" 2 labels (" in body, body  # what fills it


def _sink(k8s_server: FakeKubeAPI) -> NodeFeatureSink:
    """A NodeFeature sink on the test API server: no owner references, no watch."""
    import kubernetes.client

    kc = kubernetes.client.Configuration()
    kc.host = k8s_server.url
    return NodeFeatureSink(
        node_name="n", namespace="nfd", api_client=kubernetes.client.ApiClient(kc),
        owner_refs=(), watch=False,
    )  # fmt: skip


def test_object_over_the_byte_limit_is_not_sent(k8s_server: FakeKubeAPI) -> None:
    sink = _sink(k8s_server)
    value = "v" * 63
    n = (1 << 20) // 100 + 10  # a little over 1 MiB
    labels = {f"example.com/k{i:06d}-{'x' * 20}": value for i in range(n)}
    try:
        sink.publish(Publication(labels, empty()))
    except SinkError as e:
        assert "not sent" in str(e) and not e.transient
    else:
        raise AssertionError("a 1 MiB object was sent")
    assert k8s_server.counts["create"] == 0 and k8s_server.counts["patch"] == 0


def test_an_object_over_1_mib_as_the_server_stores_it_is_not_sent(
    k8s_server: FakeKubeAPI,
) -> None:
    """0.3 MiB in Python's JSON, 1.8 MiB as Go's (``<`` is ``\\u003c``): not sent.

    The old count, Python's JSON, sent it; etcd refused it (tests/e2e/test_size_refusal.py).
    """
    sink = _sink(k8s_server)
    features = empty()
    features["attributes"]["gpu.inventory"] = {
        "elements": {f"k{i:06d}": "<" * 300 for i in range(1000)}
    }
    with pytest.raises(SinkError, match=r"would be 18\d{5} bytes: .* not sent"):
        sink.publish(Publication({"example.com/a": "b"}, features))
    assert k8s_server.counts["create"] == 0 and k8s_server.counts["patch"] == 0


def test_features_grown_past_the_byte_limit_under_the_same_labels_are_not_sent(
    k8s_server: FakeKubeAPI,
) -> None:
    """The labels' size is measured once per label set (hundreds with rules): an object whose
    features grow past the limit while its labels stay is still refused, and the next one
    within the limit is sent."""
    sink = _sink(k8s_server)
    labels = {f"example.com/k{i:04d}": "v" * 60 for i in range(MAX_OBJECT_BYTES // 100)}
    assert sink.publish(Publication(labels, empty()))
    big = empty()
    add_attributes(big, "gpu.blob", {f"a{i}": "x" * 90 for i in range(MAX_OBJECT_BYTES // 180)})
    with pytest.raises(SinkError, match="not sent"):
        sink.publish(Publication(labels, big))
    assert k8s_server.counts["patch"] == 0
    small = empty()
    add_attributes(small, "gpu.blob", {"a": "x"})
    assert sink.publish(Publication(labels, small)) and k8s_server.counts["patch"] == 1


def test_label_measure_is_the_json_size_and_the_keys_outside_over_label_changes() -> None:
    import random

    from nfd_gpu.sinks.nodefeature_size import LabelMeasure, json_size

    rng = random.Random(3)
    allowed = ("nvidia.com/", "gpu.feature.node.kubernetes.io/")
    keys = [f"{p}k{i}" for p in (*allowed, "example.com/", "") for i in range(30)]
    m = LabelMeasure()
    labels: dict[str, str] = {}
    for _ in range(300):
        for _ in range(rng.randrange(6)):
            k = rng.choice(keys)
            if k in labels and rng.random() < 0.4:
                del labels[k]
            else:
                labels[k] = rng.choice(["true", "", 'é"x', "a<b&c", "9" * rng.randrange(5)])
        got = m.update(dict(labels), allowed)
        assert got == (json_size(labels), sorted(k for k in labels if not k.startswith(allowed)))
