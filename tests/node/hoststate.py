"""What the real node could leave behind on the host, as one comparable snapshot.

:func:`host_state` reads, in the host's own namespaces: the sysctls (every readable
``/proc/sys`` file but the counters in :data:`VOLATILE`), the iptables and ip6tables rules
of every table, the network interfaces, the mounts at or under the places the node uses
(:data:`PLACES`), the first level of every cgroup hierarchy, and whether the runtime's
default directories exist. tests/node compares it before the node starts and after it
stops; processes are checked by the node itself (none left in its cgroups or naming its
directory).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Any

# Counters the kernel changes on its own (or any process changes by running).
VOLATILE = (
    "kernel/random/*",
    "kernel/ns_last_pid",
    "kernel/pty/nr",
    "fs/dentry-state",
    "fs/file-nr",
    "fs/inode-nr",
    "fs/inode-state",
    "fs/aio-nr",
    "fs/quota/*",
    "net/netfilter/nf_conntrack_count",
    "kernel/sched_*",
    "vm/stat_refresh",
    "vm/compact_memory",
    "vm/drop_caches",
)
PLACES = ("/run", "/var/lib", "/var/log", "/proc/sys", "/sys/fs/cgroup", "/etc/cni", "/opt/cni")
RUNTIME_DIRS = (
    "/run/containerd", "/run/netns", "/var/run/netns", "/var/lib/cni", "/var/lib/kubelet",
    "/var/lib/containerd", "/var/log/pods", "/var/log/containers", "/etc/cni/net.d",
    "/etc/kubernetes",
)  # fmt: skip


def _sysctls() -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, _, files in os.walk("/proc/sys"):
        for f in files:
            path = os.path.join(dirpath, f)
            key = path[len("/proc/sys/") :]
            if any(fnmatch.fnmatchcase(key, g) for g in VOLATILE):
                continue
            with contextlib.suppress(OSError), open(path) as fh:
                out[key] = fh.read()
    return out


def _rules() -> dict[str, str]:
    out = {}
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle", "raw"):
            r = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True)
            out[f"{tool} {table}"] = r.stdout if r.returncode == 0 else f"error: {r.stderr}"
    return out


def _mounts() -> list[str]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4]
            if any(point == p or point.startswith(p + "/") for p in PLACES):
                sep = fields.index("-")
                out.append(f"{point} {fields[sep + 1]} {fields[sep + 2]} {fields[3]}")
    return sorted(out)


def _cgroups() -> list[str]:
    """The first-level cgroups, but another test process's real node (``nfd-gpu-test-<pid>``
    of a pytest that is not this one: two runs on one machine) is its own business."""
    root = Path("/sys/fs/cgroup")
    mine = f"nfd-gpu-test-{os.getpid()}"

    def others(name: str) -> bool:
        return name.startswith("nfd-gpu-test-") and name != mine

    return sorted(
        str(d)
        for h in root.iterdir()
        if h.is_dir()
        for d in h.iterdir()
        if d.is_dir() and not others(d.name)
    )


def host_state() -> dict[str, Any]:
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return {
        "sysctls": _sysctls(),
        "iptables": _rules(),
        "links": sorted(line.split(":")[1].strip() for line in links.stdout.splitlines()),
        "mounts": _mounts(),
        "cgroups": _cgroups(),
        "runtime dirs": [d for d in RUNTIME_DIRS if os.path.lexists(d)],
    }


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per thing that changed (empty when the host is as it was)."""
    out = []
    for part, was in before.items():
        now = after[part]
        if isinstance(was, dict):
            for k in sorted(set(was) | set(now)):
                if was.get(k) != now.get(k):
                    out.append(f"{part}: {k}: {was.get(k)!r} -> {now.get(k)!r}")
        elif was != now:
            out.append(
                f"{part}: {sorted(set(was) - set(now))} gone, {sorted(set(now) - set(was))} new"
            )
    return out
