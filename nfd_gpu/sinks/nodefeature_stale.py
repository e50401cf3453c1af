"""The removal of a NodeFeature an earlier ``nodefeature`` output left: the ``retire`` of
that output (``nodefeature.py``). Not the sink's own path: the sink never deletes its
object, and its Role has no ``delete`` (the chart's ``nodeFeatureCleanup`` Role grants
``get`` and ``delete`` for this alone; ``tests/deploy`` checks the sink's verbs)."""

from __future__ import annotations

import logging
import os
from typing import Any

from nfd_gpu.sinks import OutputSettings, SinkError
from nfd_gpu.sinks.kubeclient import (
    GROUP,
    NODE_NAME_LABEL,
    PLURAL,
    SA_TOKEN_FILE,
    VERSION,
    build_api_client,
    namespace_fallback,
    object_name,
)

log = logging.getLogger("nfd_gpu.agent")  # one of the agent's start-up lines


def remove_stale(cfg: OutputSettings) -> None:
    """Delete the NodeFeature an earlier run on this node published, ``nfd-gpu-<node>``, when
    ``nodefeature`` is no longer an output (``helm upgrade --set 'outputs={featurefile}'``):
    its owner, the DaemonSet, survives the switch, so nothing else removes it and
    nfd-master would keep its labels. Tried once at start, and only with cluster credentials
    (the pod's token, or ``--kubeconfig``); the object must carry this node's
    ``nfd.node.kubernetes.io/node-name`` label, and is deleted with its uid and
    resourceVersion as preconditions. Never fatal: a failure is one log line. The agent
    calls it when ``nodefeature`` is not an output and this is no dry run."""
    if not cfg.node_name:
        return
    if not cfg.kubeconfig and not os.path.isfile(SA_TOKEN_FILE):
        return  # a host run, or a pod without API access (automountServiceAccountToken off)
    namespace = cfg.namespace or namespace_fallback()
    if not namespace:
        return
    name = object_name(cfg.node_name)
    where = f"NodeFeature {namespace}/{name}"
    args = (GROUP, VERSION, namespace, PLURAL, name)
    try:
        from kubernetes.client import CustomObjectsApi  # lazy: only with credentials
        from kubernetes.client.exceptions import ApiException  # lazy: as above
        from urllib3.exceptions import HTTPError  # lazy: comes with kubernetes
    except ImportError:
        log.debug("%s: not checked (the kubernetes client is not installed)", where)
        return
    try:
        api: Any = CustomObjectsApi(build_api_client(cfg.kubeconfig))
        obj = api.get_namespaced_custom_object(*args, _request_timeout=cfg.api_timeout)
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(NODE_NAME_LABEL) != cfg.node_name:
            log.warning("%s: no %s=%s label, not ours: left", where, NODE_NAME_LABEL, cfg.node_name)
            return
        pre = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        api.delete_namespaced_custom_object(
            *args, body={"preconditions": pre}, _request_timeout=cfg.api_timeout
        )
        log.info("removed %s: nodefeature is no longer an output, its labels leave the node", where)
    except ApiException as e:
        if e.status == 404:
            log.debug("%s: none (nothing stale)", where)
        else:
            log.warning(
                "%s: not removed (%s %s); if it is stale: kubectl -n %s delete nodefeature %s",
                where, e.status, e.reason, namespace, name,
            )  # fmt: skip
    except (SinkError, OSError, ValueError, HTTPError) as e:
        log.warning("%s: not checked: %s", where, e)
