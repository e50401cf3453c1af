"""The NodeFeature sink's merge patch: what it sends, and the PUT where no patch can be sent.

The patch is applied here by the test server's own RFC 7386 code (tests/k8s_api_server.py);
tests/e2e/test_sink_real_server.py has kube-apiserver apply it.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nfd_gpu.sinks import Publication, SinkError
from nfd_gpu.sinks.nodefeature import NODE_NAME_LABEL, STATE_ANNOTATION, NodeFeatureSink
from nfd_gpu.sinks.nodefeature_patch import diff, merge_patch
from tests.k8s_api_server import FakeKubeAPI, apply_merge_patch
from tests.sinks.publications import pub

NS = "nfd-gpu"
OBJ = "nfd-gpu-node-a"
COUNT = "gpu.feature.node.kubernetes.io/count"
PRESENT = "gpu.feature.node.kubernetes.io/present"


def make_sink(api_client: object) -> tuple[NodeFeatureSink, list[dict[str, Any]]]:
    """A sink whose patches are also kept in the list returned with it."""
    sink = NodeFeatureSink(
        node_name="node-a", namespace=NS, api_client=api_client, owner_refs=(),
        sleep=lambda s: None, rng=random.Random(1), watch=False,
    )  # fmt: skip
    sent: list[dict[str, Any]] = []
    patch = sink.api.patch

    def keep(body: dict[str, Any]) -> Any:
        sent.append(copy.deepcopy(body))
        return patch(body)

    sink.api.patch = keep  # type: ignore[method-assign]
    return sink, sent


def test_a_change_sends_only_what_changed(k8s_server: FakeKubeAPI, api_client: object) -> None:
    sink, sent = make_sink(api_client)
    sink.publish(pub(8))
    rv = k8s_server.get(NS, OBJ)["metadata"]["resourceVersion"]  # type: ignore[index]
    assert sink.publish(pub(9)) is True
    (patch,) = sent
    assert patch["metadata"] == {"resourceVersion": rv}
    assert patch["spec"]["labels"] == {COUNT: "9"}
    assert patch["spec"]["features"] == {
        "attributes": {"gpu.node": {"elements": {"count": "9"}}},
        "instances": pub(9).features["instances"],  # a list: replaced whole
    }
    assert k8s_server.counts["patch"] == 1 and k8s_server.counts["update"] == 0
    obj = k8s_server.get(NS, OBJ)
    assert obj is not None and obj["spec"] == sink.desired(pub(9))["spec"]


def test_what_is_gone_is_null_and_gone_from_the_object(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink, sent = make_sink(api_client)
    sink.publish(pub(8))
    smaller = pub(8)
    del smaller.labels[PRESENT]
    del smaller.features["flags"]["gpu.capability"]
    assert sink.publish(smaller) is True
    assert sent[0]["spec"] == {
        "labels": {PRESENT: None},
        "features": {"flags": {"gpu.capability": None}},
    }
    obj = k8s_server.get(NS, OBJ)
    assert obj is not None and obj["spec"]["labels"] == smaller.labels
    assert obj["spec"]["features"]["flags"] == {}


def test_held_health_and_node_label_are_patched(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    sink, sent = make_sink(api_client)
    sink.publish(pub(8))
    held = Publication(pub(8).labels, pub(8).features, state='{"held": 1}')
    assert sink.publish(held) is True
    assert sent[-1]["metadata"]["annotations"] == {STATE_ANNOTATION: '{"held": 1}'}
    assert "spec" not in sent[-1]
    k8s_server.edit(NS, OBJ, lambda o: o["metadata"]["labels"].update({NODE_NAME_LABEL: "b"}))
    sink._read_server()  # the sink sees the relabelled object, as its watch would
    assert sink.publish(pub(8)) is True  # the state dropped and the node label restored
    assert sent[-1]["metadata"]["annotations"] == {STATE_ANNOTATION: None}
    assert sent[-1]["metadata"]["labels"] == {NODE_NAME_LABEL: "node-a"}
    obj = k8s_server.get(NS, OBJ)
    assert obj is not None and STATE_ANNOTATION not in obj["metadata"].get("annotations", {})
    assert obj["metadata"]["labels"][NODE_NAME_LABEL] == "node-a"


def test_a_role_without_patch_falls_back_to_update_once(
    k8s_server: FakeKubeAPI, api_client: object, caplog: pytest.LogCaptureFixture
) -> None:
    sink, _ = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.deny("patch")
    with caplog.at_level(logging.WARNING):
        assert sink.publish(pub(9)) is True
        assert sink.publish(pub(10)) is True
    assert k8s_server.counts["patch"] == 1 and k8s_server.counts["update"] == 2
    said = [r.getMessage() for r in caplog.records if "from now on" in r.getMessage()]
    assert len(said) == 1 and "RBAC verb 'patch'" in said[0], said
    obj = k8s_server.get(NS, OBJ)
    assert obj is not None and obj["spec"]["labels"][COUNT] == "10"


def test_a_patch_of_a_changed_object_is_refused_and_retried(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """The version in the patch is its precondition: a foreign write in between is a 409,
    then a re-read and a patch of the fresh object."""
    sink, sent = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.bump(NS, OBJ)
    assert sink.publish(pub(9)) is True
    assert k8s_server.counts["patch"] == 2 and k8s_server.counts["get"] == 2
    assert sent[0]["metadata"]["resourceVersion"] != sent[1]["metadata"]["resourceVersion"]


def test_the_test_server_refuses_another_patch_type(k8s_server: FakeKubeAPI) -> None:
    code, body = k8s_server.handle(
        "PATCH", f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{NS}/nodefeatures/x", {},
        "application/strategic-merge-patch+json",
    )  # fmt: skip
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


def test_no_patch_without_a_version_or_for_a_null() -> None:
    want = {"metadata": {"labels": {NODE_NAME_LABEL: "n"}, "ownerReferences": []},
            "spec": {"labels": {"a": "1"}, "features": {}}}  # fmt: skip
    assert (
        merge_patch({"metadata": {}, "spec": {}}, want, NODE_NAME_LABEL, STATE_ANNOTATION) is None
    )
    cur = {"metadata": {"resourceVersion": "5", "labels": {NODE_NAME_LABEL: "n"}}, "spec": {}}
    got = merge_patch(cur, want, NODE_NAME_LABEL, STATE_ANNOTATION)
    assert got == {"metadata": {"resourceVersion": "5"}, "spec": want["spec"]}
    nulled = {**want, "spec": {"labels": {"a": None}}}
    assert merge_patch(cur, nulled, NODE_NAME_LABEL, STATE_ANNOTATION) is None


# JSON values without nulls in objects (a merge patch cannot state those); lists may hold any
_scalars = st.one_of(st.text(max_size=3), st.integers(-2, 2), st.booleans())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(st.one_of(inner, st.none()), max_size=3),
        st.dictionaries(st.sampled_from("abcd"), inner, max_size=4),
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.sampled_from("abcde"), _values, max_size=5)


@settings(max_examples=400, deadline=None)
@given(old=st.one_of(_objects, _values), new=_objects)
def test_the_patch_applied_to_the_old_object_is_the_new_one(old: Any, new: dict[str, Any]) -> None:
    """RFC 7386, applied by the test server's code: old + diff(old, new) == new."""
    before = json.dumps(old, sort_keys=True)
    patch = diff(old, new)
    assert json.dumps(old, sort_keys=True) == before  # old is not changed
    assert apply_merge_patch(copy.deepcopy(old), json.loads(json.dumps(patch))) == new
    if isinstance(old, dict):
        assert set(patch) <= set(old) | set(new)  # only what differs
        assert all(old.get(k) != v for k, v in new.items() if k in patch)


def test_a_role_refusing_both_writes_keeps_patching(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """A PUT refused too says the Role refuses writes, not that it lacks patch: once the
    Role allows update, the next refused patch falls back; with patch allowed, patches."""
    sink, _ = make_sink(api_client)
    sink.publish(pub(8))
    k8s_server.deny("patch")
    k8s_server.deny("update")
    with pytest.raises(SinkError, match="RBAC verb 'update'"):
        sink.publish(pub(9))
    assert k8s_server.counts["patch"] == 1 and k8s_server.counts["update"] == 1
    k8s_server.allow("update")
    assert sink.publish(pub(9)) is True
    assert k8s_server.counts["patch"] == 2 and k8s_server.counts["update"] == 2
    assert sink.publish(pub(10)) is True  # the Role lacks patch: PUTs from now on
    assert k8s_server.counts["patch"] == 2 and k8s_server.counts["update"] == 3


def test_the_version_a_write_was_made_against_is_no_news(
    k8s_server: FakeKubeAPI, api_client: object
) -> None:
    """A foreign edit's event that comes during the write made against it (a 409, a re-read,
    the patch) and is applied after the write's answer is neither drift nor the object."""
    sink, _ = make_sink(api_client)
    woke: list[int] = []
    sink.on_drift = lambda: woke.append(1)
    sink.publish(pub(8))
    k8s_server.edit(NS, OBJ, lambda o: o["metadata"].update(annotations={"someone/else": "x"}))
    edited = k8s_server.get(NS, OBJ)
    assert sink.publish(pub(9)) is True
    assert k8s_server.counts["patch"] == 2  # the 409, then the patch of the re-read object
    now = k8s_server.get(NS, OBJ)["metadata"]["resourceVersion"]  # type: ignore[index]
    sink.on_watch_event("MODIFIED", edited)  # its event, late
    assert woke == [] and sink._obj["metadata"]["resourceVersion"] == now  # type: ignore[index]
    assert sink.publish(pub(9)) is False and sink.take_repair() is None
