"""The NodeFeature's owner references: the agent's Pod, and the DaemonSet that owns the Pod.

- With them, Kubernetes' garbage collector deletes the object once its owner is gone.
- The Pod's comes from the downward API (name and uid); the DaemonSet's from the Pod's own
  ``ownerReferences``, read once.
- An unreadable Pod is a warning, no DaemonSet reference; a transient failure is raised,
  for the next pass to try again.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from nfd_gpu.sinks import SinkError
from nfd_gpu.sinks.kubeclient import ApiStatus, ObjectClient

log = logging.getLogger("nfd_gpu.sinks.nodefeature")

Obj = dict[str, Any]


def owner_key(refs: Sequence[Obj]) -> list[tuple[str, str, str, str]]:
    """The references compared as their identity, in any order."""
    return sorted(
        (str(r.get("apiVersion")), str(r.get("kind")), str(r.get("name")), str(r.get("uid")))
        for r in refs
    )


def owner_references(
    api: ObjectClient, kinds: Collection[str], pod_name: str | None, pod_uid: str | None
) -> list[Obj]:
    """The references of ``kinds`` (``pod``, ``ds``) for the Pod ``pod_name``."""
    refs: list[Obj] = []
    have_pod = bool(pod_name and pod_uid)
    if "pod" in kinds and have_pod:
        refs.append(_ref("v1", "Pod", str(pod_name), str(pod_uid)))
    if "ds" in kinds and have_pod:
        api.connect()
        try:
            pod = api.own_pod(str(pod_name))
            for ref in pod.get("metadata", {}).get("ownerReferences") or []:
                if ref.get("kind") == "DaemonSet" and ref.get("apiVersion") == "apps/v1":
                    refs.append(_ref("apps/v1", "DaemonSet", ref["name"], ref["uid"]))
                    break
        except (ValueError, AttributeError, KeyError, TypeError) as e:
            log.warning("own pod %s: unreadable answer (%s): no DaemonSet owner", pod_name, e)
        except ApiStatus as s:
            log.warning("own pod %s not readable (%s): no DaemonSet owner", pod_name, s)
        except SinkError as e:
            if e.transient:
                raise
            log.warning("no DaemonSet owner reference: %s", e)
    return refs


def _ref(api_version: str, kind: str, name: str, uid: str) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            "blockOwnerDeletion": False}  # fmt: skip
