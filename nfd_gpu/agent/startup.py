"""The one line ``run`` logs at start, the NVML state it reports, and the removal of a
NodeFeature left from an earlier output."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from typing import Any

from nfd_gpu import __version__
from nfd_gpu.config import Config, namespace_fallback
from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING
from nfd_gpu.hostroot import HostRoot
from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.nodefeature import GROUP, NODE_NAME_LABEL, PLURAL, VERSION, build_api_client
from nfd_gpu.sinks.registry import OUTPUTS, chosen

log = logging.getLogger("nfd_gpu.agent")
# The pod's service-account token (what the kubelet mounts when automount is on).
SA_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"

# Rules applied on every pass when --rules is not given (and the directory exists).
DEFAULT_RULES_DIR = "/etc/nfd-gpu/rules.d"


def nvml_state(mode: str, root: str) -> str:
    """The NVML a pass will ask (``--nvml`` mode, then what it finds), for the start-up line.
    The library is tried once here (``nvmlInit``/``nvmlShutdown``); every pass reports its
    own source afterwards ("NVIDIA facts from")."""
    if mode == "off":
        return "off"
    from nfd_gpu.discovery.nvidia import nvml  # lazy: the NVML adapter only when NVML is on

    host = HostRoot(root)  # the recording as the scan sees it: confined to the root
    try:
        st = host.stat(NVML_RECORDING)
    finally:
        host.close()
    if st is not None and stat.S_ISREG(st.st_mode):
        return f"{mode}: replay {os.path.join(root, NVML_RECORDING)}"

    lib = nvml.load_library()
    if lib is None:
        return f"{mode}: library unavailable (nvidia-ml-py not installed)"
    try:
        lib.nvmlInit()
    except Exception as e:  # no libnvidia-ml, driver not loaded
        return f"{mode}: library unavailable ({' '.join(str(e).split()) or type(e).__name__})"
    try:
        version = lib.nvmlSystemGetDriverVersion()
        if isinstance(version, bytes):
            version = version.decode("utf-8", "replace")
        return f"{mode}: library ok (driver {version})"
    except Exception:
        return f"{mode}: library ok"
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()


def startup_line(cfg: Config) -> str:
    """The one line ``run`` logs at start: version and the settings that shape a pass."""
    mode = "oneshot" if cfg.oneshot else f"interval {cfg.interval:g}s"
    parts = [
        f"nfd-gpu {__version__} starting:",
        f"outputs={','.join(cfg.outputs)}",
        f"profiles={','.join(cfg.profiles)}",
        f"root={cfg.root}",
        f"nvml={nvml_state(cfg.nvml, cfg.root)}",
        mode,
    ]
    parts += [o.describe(cfg) for o in chosen(cfg.outputs) if o.describe is not None]
    parts.append(f"rules={cfg.rules or DEFAULT_RULES_DIR + ' (if present)'}")
    parts.append(f"metrics={cfg.metrics_address or 'off'}")
    return " ".join(parts)


def warn_deprecated(cfg: Config) -> None:
    """One warning per deprecated output asked for (``Output.deprecated``)."""
    for out in cfg.outputs:
        why = OUTPUTS[out].deprecated
        if why:
            log.warning("--output %s is deprecated and goes in the next minor release: %s", out,
                        why)  # fmt: skip


def remove_stale_nodefeature(cfg: Config) -> None:
    """Delete the NodeFeature an earlier run on this node published, ``nfd-gpu-<node>``, when
    ``nodefeature`` is no longer an output (``helm upgrade --set 'outputs={featurefile}'``):
    its owner, the DaemonSet, survives the switch, so nothing else removes it and
    nfd-master would keep its labels. Tried once at start, and only with cluster credentials
    (the pod's token, or ``--kubeconfig``); the object must carry this node's
    ``nfd.node.kubernetes.io/node-name`` label, and is deleted with its uid and
    resourceVersion as preconditions. Never fatal: a failure is one log line."""
    if "nodefeature" in cfg.outputs or cfg.dry_run or not cfg.node_name:
        return
    if not cfg.kubeconfig and not os.path.isfile(SA_TOKEN_FILE):
        return  # a host run, or a pod without API access (automountServiceAccountToken off)
    namespace = cfg.namespace or namespace_fallback()
    if not namespace:
        return
    name = f"nfd-gpu-{cfg.node_name}"
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
