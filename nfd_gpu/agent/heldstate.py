"""Faults that survive a restart: the agent's held health, published beside its labels.

A GPU ``failed`` before the agent restarted stays ``failed`` until the hardware shows it was
re-initialised. The restart may be a rollout, an OOM kill or a liveness kill.

- An XID is an event, read once.
- NVIDIA's catalog says XID 48, 79, 94/95 and the like need a GPU reset or a reboot.
- So a fresh agent that forgot it would say ``ok`` over a GPU nobody reset.

Each pass the agent publishes what it holds with the sinks, :func:`encode`'s line:

- the GPUs held ``failed``, their faults and XIDs;
- the boot set when a GPU is lost;
- nothing while nothing is held;
- written as the NodeFeature's ``gpu.feature.node.kubernetes.io/held-health`` annotation
  and as a comment line of the feature file.

At start it reads that back with :func:`decode` and carries each GPU forward, unless:

* the node rebooted since: the kernel's boot id, ``/proc/sys/kernel/random/boot_id``, is not
  the one stored; every fault clears;
* the GPU's PCI function was removed and added again, or its driver re-bound by a driver
  reload or an unbind/bind: :func:`instance` changed; that GPU's faults clear;
* the GPU is no longer on the bus: it is not made up again; a GPU of the boot set stays
  ``lost``.

A published state that is not valid JSON of this shape, or another node's, is ignored with
one warning naming where it was read. See docs/health.md "Across restarts".
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from typing import Any

from nfd_gpu.health.signals import BY_REASON
from nfd_gpu.host import HostRoot
from nfd_gpu.model import HealthReason
from nfd_gpu.record import Record, record

KIND = "nfd-gpu/held-health"
VERSION = 1
BOOT_ID = "proc/sys/kernel/random/boot_id"
MAX_GPUS = 64  # GPUs stored (a node has at most a few dozen)
MAX_FAULTS = 16  # faults and XIDs stored per GPU (the worst first)
MAX_TEXT = 16384  # bytes of a published state read back
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_WORD = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}")  # a fault's source


def boot_id(host: HostRoot) -> str | None:
    """The kernel's boot id, through the root; None when none reads as one.

    Where the root has no ``/proc/sys``, the process's own is read: the DaemonSet mounts only
    ``/proc/driver``. It is the same kernel's, as the boot id is not namespaced.
    """
    text = host.read_text(BOOT_ID)
    if text is None and host.root != "/":
        text = HostRoot("/").read_text(BOOT_ID)
    return text if text is not None and _UUID.fullmatch(text) else None


def instance(host: HostRoot, address: str) -> str:
    """The kernel's instance of the GPU's PCI function and of its driver binding.

    - It is the sysfs inode numbers of ``sys/bus/pci/devices/<address>`` and of its ``driver``
      link; ``-`` for one that is not there.
    - sysfs gives every new node a new number.
    - So both change when the function is removed and added again, by a rescan or a hot-plug.
    - The second changes when a driver binds it again, by a driver reload or an unbind/bind.
    """
    dev = host.lstat(f"sys/bus/pci/devices/{address}")
    drv = host.lstat(f"sys/bus/pci/devices/{address}/driver") if dev is not None else None
    return f"{dev.st_ino if dev else '-'}:{drv.st_ino if drv else '-'}"


def on_bus(inst: str) -> bool:
    return not inst.startswith("-")


@record(slots=False)
class HeldGpu(Record):
    instance: str  # instance() when it was held
    reasons: tuple[HealthReason, ...]  # its faults other than XIDs
    xids: tuple[int, ...]


@record(slots=False)
class HeldState(Record):
    boot_id: str
    node: str = ""  # the node name, where the agent knows it
    gpus: dict[str, HeldGpu] = field(default_factory=dict)
    boot: tuple[str, ...] = ()  # the boot set (a GPU of it gone after the restart is lost)


def encode(state: HeldState) -> str:
    """One bounded line of JSON; "" when nothing is held: no GPU and no boot set.

    At most MAX_GPUS GPUs, and MAX_FAULTS faults and XIDs each.
    """
    if not state.gpus and not state.boot:
        return ""
    gpus: dict[str, Any] = {}
    for address in sorted(state.gpus)[:MAX_GPUS]:
        g = state.gpus[address]
        faults = [[r.reason, r.source, r.value, r.severity] for r in g.reasons][:MAX_FAULTS]
        gpus[address] = {
            "instance": g.instance,
            "faults": faults,
            "xids": list(g.xids[:MAX_FAULTS]),
        }
    doc: dict[str, Any] = {"kind": KIND, "version": VERSION, "bootId": state.boot_id}
    if state.node:
        doc["node"] = state.node
    doc["gpus"] = gpus
    if state.boot:
        doc["boot"] = sorted(state.boot)[: MAX_GPUS * 4]
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


class Foreign(ValueError):
    """A published state that is not this agent's: another node's, another kind."""


def decode(text: str, node: str = "") -> HeldState:
    """The held state published as ``text``.

    - ValueError, one line, when it is not one.
    - :class:`Foreign` when it is another node's or another writer's.
    """
    if len(text) > MAX_TEXT:
        raise ValueError(f"{len(text)} bytes, more than the {MAX_TEXT} a held state has")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise Foreign(f"not an nfd-gpu held state (kind {_kind(doc)!r})")
    if doc.get("version") != VERSION:
        raise Foreign(f"version {doc.get('version')!r}, this agent reads {VERSION}")
    if node and doc.get("node", node) != node:
        raise Foreign(f"written for node {str(doc.get('node'))[:64]!r}, this is {node!r}")
    boot = doc.get("bootId")
    if not isinstance(boot, str) or not _UUID.fullmatch(boot):
        raise ValueError("bootId is not a boot id")
    gpus = doc.get("gpus", {})
    if not isinstance(gpus, dict) or len(gpus) > MAX_GPUS:
        raise ValueError(f"gpus is not a map of at most {MAX_GPUS} GPUs")
    held = {_address(a): _gpu(a, g) for a, g in gpus.items()}
    addresses = doc.get("boot", [])
    if not isinstance(addresses, list) or len(addresses) > MAX_GPUS * 4:
        raise ValueError("boot is not a list of GPU addresses")
    return HeldState(boot, str(doc.get("node", "")), held, tuple(_address(a) for a in addresses))


def _kind(doc: Any) -> str:
    return str(doc.get("kind"))[:64] if isinstance(doc, dict) else type(doc).__name__


def _address(a: Any) -> str:
    if not isinstance(a, str) or not _ADDRESS.fullmatch(a):
        raise ValueError(f"{str(a)[:40]!r} is not a PCI address")
    return a


def _gpu(address: str, g: Any) -> HeldGpu:
    if not isinstance(g, dict):
        raise ValueError(f"GPU {address}: not a map")
    inst, faults, xids = g.get("instance"), g.get("faults", []), g.get("xids", [])
    if not isinstance(inst, str) or not re.fullmatch(r"(\d{1,20}|-):(\d{1,20}|-)", inst):
        raise ValueError(f"GPU {address}: instance is not two inode numbers")
    if not isinstance(faults, list) or len(faults) > MAX_FAULTS:
        raise ValueError(f"GPU {address}: faults is not a list of at most {MAX_FAULTS}")
    if not isinstance(xids, list) or len(xids) > MAX_FAULTS:
        raise ValueError(f"GPU {address}: xids is not a list of at most {MAX_FAULTS}")
    reasons = tuple(_fault(address, f) for f in faults)
    if not all(_count(x) for x in xids):
        raise ValueError(f"GPU {address}: an XID is not a number")
    return HeldGpu(inst, reasons, tuple(int(x) for x in xids))


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < 1 << 63


def _fault(address: str, f: Any) -> HealthReason:
    ok = (
        isinstance(f, list)
        and len(f) == 4
        and f[0] in BY_REASON
        and isinstance(f[1], str)
        and _WORD.fullmatch(f[1]) is not None
        and _count(f[2])
        and f[3] in ("failed", "degraded")
    )
    if not ok:
        raise ValueError(f"GPU {address}: a fault is not [reason, source, count, severity]")
    return HealthReason(f[0], f[1], f[2], f[3])
