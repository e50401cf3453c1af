"""The removal of a NodeFeature an earlier ``nodefeature`` output left.

- It is the ``retire`` of that output, in ``nodefeature.py``.
- It is not the sink's own path: the sink never deletes its object, and its Role has no
  ``delete``.
- The chart's ``nodeFeatureCleanup`` Role grants ``get`` and ``delete`` for this alone.
  ``tests/deploy`` checks the sink's verbs.

The requests run in a short child process: ``python -m nfd_gpu.sinks.nodefeature_stale``.

- The agent that calls this has no ``nodefeature`` output.
- Importing the Kubernetes client for two requests would keep ~20 MB of RSS for the
  agent's life.
- The child prints its log lines as ``LEVEL message``; the agent logs them as its own.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from nfd_gpu.sinks import OutputSettings, SinkError
from nfd_gpu.sinks.kubeclient import (
    GROUP,
    NODE_NAME_LABEL,
    OBJECT_PATH,
    PLURAL,
    SA_TOKEN_FILE,
    VERSION,
    api_exception,
    build_api_client,
    namespace_fallback,
    object_name,
    request,
)

log = logging.getLogger("nfd_gpu.agent")  # one of the agent's start-up lines


def remove_stale(cfg: OutputSettings) -> None:
    """Delete the NodeFeature an earlier run on this node published, ``nfd-gpu-<node>``.

    It runs when ``nodefeature`` is no longer an output, as after
    ``helm upgrade --set 'outputs={featurefile}'``. Its owner, the DaemonSet, survives the
    switch, so nothing else removes it, and nfd-master would keep its labels.

    - It is tried once at start.
    - Only with cluster credentials: the pod's token, or ``--kubeconfig``.
    - The object must carry this node's ``nfd.node.kubernetes.io/node-name`` label.
    - It is deleted with its uid and resourceVersion as preconditions.
    - A child process deletes it, as the module docstring says.
    - Never fatal: a failure is one log line.
    - The agent calls it when ``nodefeature`` is not an output and this is no dry run.
    """
    if not cfg.node_name:
        return
    if not cfg.kubeconfig and not os.path.isfile(SA_TOKEN_FILE):
        return  # a host run, or a pod without API access (automountServiceAccountToken off)
    namespace = cfg.namespace or namespace_fallback()
    if not namespace:
        return
    where = f"NodeFeature {namespace}/{object_name(cfg.node_name)}"
    argv = [sys.executable, "-m", __name__, namespace, cfg.node_name, cfg.kubeconfig or "",
            repr(cfg.api_timeout)]  # fmt: skip
    try:  # two requests of api_timeout each, after the client's import (seconds at a limit)
        p = subprocess.run(argv, capture_output=True, text=True, timeout=2 * cfg.api_timeout + 60)
    except (OSError, subprocess.SubprocessError) as e:
        log.warning("%s: not checked: %s", where, e)
        return
    for line in p.stdout.splitlines():
        level, _, message = line.partition(" ")
        log.log(logging.getLevelName(level) if level in _LEVELS else logging.INFO, "%s", message)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        log.warning("%s: not checked: the check exited %d: %s", where, p.returncode, last)


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _remove(namespace: str, node_name: str, kubeconfig: str | None, timeout: float) -> None:
    """The check and delete, in the child that :func:`main` is."""
    name = object_name(node_name)
    where = f"NodeFeature {namespace}/{name}"
    where_params = {"group": GROUP, "version": VERSION, "namespace": namespace,
                    "plural": PLURAL, "name": name}  # fmt: skip
    try:
        ApiException = api_exception()  # lazy: only with credentials
        from urllib3.exceptions import HTTPError  # lazy: comes with kubernetes
    except ImportError:
        log.debug("%s: not checked (the kubernetes client is not installed)", where)
        return
    try:
        api = build_api_client(kubeconfig)
        obj = json.loads(request(api, "GET", OBJECT_PATH, where_params, timeout))
        meta = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
        if (meta.get("labels") or {}).get(NODE_NAME_LABEL) != node_name:
            log.warning("%s: no %s=%s label, not ours: left", where, NODE_NAME_LABEL, node_name)
            return
        pre = {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
        request(api, "DELETE", OBJECT_PATH, where_params, timeout, body={"preconditions": pre})
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


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname} " + " ".join(record.getMessage().split())


def main(argv: list[str]) -> int:
    """The child: ``NAMESPACE NODE KUBECONFIG TIMEOUT``; an empty KUBECONFIG means in-cluster."""
    namespace, node_name, kubeconfig, timeout = argv
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(_OneLine())
    log.addHandler(out)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    _remove(namespace, node_name, kubeconfig or None, float(timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
