"""A real Kubernetes node for the tests: kubelet + containerd + runc + CNI in namespaces.

``Node(workdir, cluster).start()`` brings up, for a ``tests.e2e.cluster.Cluster`` started
with ``node_authorizer=True``:

- a holder process (``unshare --net --mount``) whose network and mount namespaces the node
  lives in: its IP (:data:`NODE_IP`) on ``lo``, no uplink, no route out; tmpfs over
  ``/run``, ``/var/lib`` and ``/var/log``; the host-wide sysctls the kubelet wants
  (:data:`SYSCTLS`) bind-mounted over by files already holding its values (with
  ``protectKernelDefaults`` the kubelet refuses to start rather than write one);
- ``tests/node/forward.py``, the one way out: the API server's port relayed from the
  node's ``127.0.0.1`` and :data:`NODE_IP`, and a DNAT of the ``kubernetes`` Service IP to
  it inside the namespace (there is no kube-proxy);
- containerd (Debian's, CRI built in) with the pause image and the project's image
  imported from their OCI archives (no registry), runc, the bridge and host-local CNI
  plugins;
- kubelet (cgroup v1: ``failCgroupV1: false``; ``cgroupfs`` under a ``cgroupRoot`` of its
  own), kube-controller-manager and kube-scheduler (on the host's loopback, admin
  credentials), all built by ``tests/node/build.sh``.

``stop()`` ends every process by PID (pod processes outlive their shims), removes the
cgroup subtree and leaves the host as :func:`host_state` found it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.e2e.cluster import SERVICE_IP, Cluster, client_cert, free_port

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
BINARIES = (
    "kubelet", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "pause.oci.tar"
)  # fmt: skip
HOST_TOOLS = (
    "containerd", "containerd-shim-runc-v2", "ctr", "runc", "unshare", "nsenter", "ip", "iptables"
)  # fmt: skip
CNI_DIR = Path("/usr/lib/cni")
NODE_IP = "10.217.0.1"
POD_CIDR = "10.244.0.0/24"
# What setupKernelTunables (pkg/kubelet/cm/container_manager_linux.go) wants.
SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
CGROUP_FS = Path("/sys/fs/cgroup")


def missing_components() -> list[str]:
    """What ``tests/node/build.sh`` or Debian (containerd, runc, CNI plugins) has not
    provided yet."""
    out = [str(BIN / n) for n in BINARIES if not (BIN / n).exists()]
    out += [t for t in HOST_TOOLS if shutil.which(t) is None]
    out += [
        str(CNI_DIR / p) for p in ("bridge", "host-local", "loopback") if not (CNI_DIR / p).exists()
    ]
    return out


def cgroup_hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (and the hybrid's v2 mount, where runc makes a cgroup too)."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        raise RuntimeError("cgroup v2 only: tests/node is written for this CI's cgroup v1")
    return sorted(p for p in CGROUP_FS.iterdir() if p.is_dir())


@dataclass
class Node:
    """A running node named ``name``; :meth:`stop` ends it."""

    workdir: Path
    cluster: Cluster
    name: str = "node-0"
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def cgroup_root(self) -> str:
        return f"/nfd-gpu-test-{os.getpid()}"

    @property
    def sock(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def holder_pid(self) -> int:
        return self.procs["holder"].pid

    def ns(self, *cmd: str) -> list[str]:
        """``cmd`` inside the node's network and mount namespaces."""
        pid = self.holder_pid
        return ["nsenter", f"--net=/proc/{pid}/ns/net", f"--mount=/proc/{pid}/ns/mnt", "--", *cmd]

    def sh(self, script: str) -> str:
        """A shell script inside the node's namespaces; its output (fails loudly)."""
        r = subprocess.run(self.ns("sh", "-euc", script), capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"node: {script!r} failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout

    def _spawn(self, name: str, args: list[str], *, ns: bool = True) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("wb")
        p = subprocess.Popen(self.ns(*args) if ns else args, stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = p
        return p

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace").splitlines() if path.exists() else []
        return "\n".join(text[-lines:])

    # -- start ------------------------------------------------------------------------

    def start(self, images: list[tuple[Path, str]]) -> Node:
        """Bring the node up with ``images`` (OCI archive, reference) in containerd;
        returns when the Node is Ready."""
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._namespaces()
            self._forward()
            self._containerd()
            self._import(images)
            self.timings["containerd"] = time.monotonic() - t0
            self._control()
            self._kubelet()
            self._wait_ready(120)
        except BaseException:
            self.stop()
            raise
        self.timings["up"] = time.monotonic() - t0
        return self

    def _namespaces(self) -> None:
        self.procs["holder"] = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "--", "sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        pid = self.holder_pid
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            if time.monotonic() > deadline:
                raise RuntimeError("unshare: no network namespace in 10 s")
            time.sleep(0.02)
        sysctl = self.workdir / "sysctl"
        sysctl.mkdir()
        binds = []
        for key, value in SYSCTLS.items():
            f = sysctl / key.replace("/", ".")
            f.write_text(value + "\n")
            binds.append(f"mount --bind {f} /proc/sys/{key}")
        self.sh(
            "\n".join(
                [
                    "ip link set lo up",
                    f"ip addr add {NODE_IP}/32 dev lo",
                    "mount --make-rshared /",
                    *(
                        f"mount -t tmpfs -o mode=0755 tmpfs {d}"
                        for d in ("/run", "/var/lib", "/var/log")
                    ),
                    *binds,
                ]
            )
        )
        for h in cgroup_hierarchies():
            d = h / self.cgroup_root.lstrip("/")
            d.mkdir()
            for f in ("cpuset.cpus", "cpuset.mems"):
                if (h / f).exists():
                    (d / f).write_text((h / f).read_text())

    def _forward(self) -> None:
        port = int(self.cluster.url.rsplit(":", 1)[1])
        args = [sys.executable, "-m", "tests.node.forward", f"/proc/{self.holder_pid}/ns/net"]
        log = (self.workdir / "forward.log").open("wb")
        repo = HERE.parent.parent
        p = subprocess.Popen(
            [*args, str(port), "127.0.0.1", NODE_IP], stdout=log, stderr=log, cwd=repo
        )
        self.procs["forward"] = p
        self._wait(lambda: "listening" in self.log_tail("forward"), 10, "forward")
        # The kubernetes Service (no kube-proxy): its IP:443 is the relay on the node IP.
        self.sh(
            f"iptables -t nat -A PREROUTING -d {SERVICE_IP} -p tcp --dport 443 "
            f"-j DNAT --to-destination {NODE_IP}:{port}"
        )

    def _containerd(self) -> None:
        cni = self.workdir / "cni"
        cni.mkdir()
        (cni / "10-bridge.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "nodenet",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "cni0",
                            "isGateway": True,
                            "ipMasq": False,
                            "ipam": {
                                "type": "host-local",
                                "subnet": POD_CIDR,
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self.workdir / "ipam"),
                            },
                        },
                        {"type": "loopback"},
                    ],
                }
            )
        )
        c = self.workdir / "containerd"
        (self.workdir / "containerd.toml").write_text(_containerd_toml(c, self.sock, cni))
        self._spawn("containerd", ["containerd", "--config", str(self.workdir / "containerd.toml")])
        self._wait(self.sock.exists, 30, "containerd")

    def ctr(self, *args: str) -> str:
        return self.sh(" ".join(["ctr", "-a", str(self.sock), "-n", "k8s.io", *args]))

    def _import(self, images: list[tuple[Path, str]]) -> None:
        for archive, ref in images:
            repo = ref.rsplit(":", 1)[0]
            self.ctr(
                "images", "import", "--base-name", repo, "--snapshotter", "native", str(archive)
            )
            names = self.ctr("images", "ls", "-q").split()
            if ref not in names:
                found = [n for n in names if n.startswith(repo + ":")]
                if not found:
                    raise RuntimeError(f"ctr import of {archive} gave no {repo} image: {names}")
                self.ctr("images", "tag", found[0], ref)

    def _control(self) -> None:
        c, pki = self.cluster, self.cluster.pki
        admin = str(c.admin_kubeconfig)
        self._spawn(
            "kube-controller-manager",
            [
                str(BIN / "kube-controller-manager"),
                f"--kubeconfig={admin}",
                "--leader-elect=false",
                "--controllers=daemonset-controller,serviceaccount-controller,"
                "root-ca-certificate-publisher-controller,garbage-collector-controller,"
                # removes the not-ready taint the kubelet registers with, once Ready
                "node-lifecycle-controller",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--concurrent-daemonset-syncs=1",
            ],
            ns=False,
        )
        self._spawn(
            "kube-scheduler",
            [
                str(BIN / "kube-scheduler"),
                f"--kubeconfig={admin}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
            ],
            ns=False,
        )

    def _kubelet(self) -> None:
        pki = self.cluster.pki
        client_cert(pki, f"kubelet-{self.name}", f"system:node:{self.name}", "system:nodes")
        kubeconfig = self.cluster.write_kubeconfig(
            self.workdir / "kubelet.kubeconfig",
            {
                "client-certificate": str(pki / f"kubelet-{self.name}.crt"),
                "client-key": str(pki / f"kubelet-{self.name}.key"),
            },
        )
        cfg = self.workdir / "kubelet.yaml"
        cfg.write_text(yaml.safe_dump(_kubelet_config(self, pki / "ca.crt")))
        self._spawn(
            "kubelet",
            [
                str(BIN / "kubelet"),
                f"--config={cfg}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.workdir / 'kubelet'}",
                f"--cert-dir={self.workdir / 'kubelet-pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
        )

    def _wait(self, cond: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():  # type: ignore[operator]
            for name, p in self.procs.items():
                if p.poll() is not None and name != "holder":
                    raise RuntimeError(f"{name} exited {p.returncode}:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not up in {timeout} s:\n{self.log_tail(what)}")
            time.sleep(0.1)

    def ready(self) -> bool:
        try:
            node = self.cluster.request("GET", f"/api/v1/nodes/{self.name}")
        except Exception:
            return False
        conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or []}
        return conds.get("Ready") == "True"

    def _wait_ready(self, timeout: float) -> None:
        t0 = time.monotonic()
        self._wait(self.ready, timeout, "kubelet")
        self.timings["kubelet ready"] = time.monotonic() - t0

    # -- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        """End the node: kubelet, every pod process (by PID), containerd and its shims,
        the relay, the namespaces; then the cgroup subtree."""
        t0 = time.monotonic()
        for name in ("kubelet", "kube-controller-manager", "kube-scheduler"):
            _end(self.procs.get(name))
        self._kill_cgroup_tasks()
        _end(self.procs.get("containerd"))
        for pid in self.our_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._kill_cgroup_tasks()
        for name in ("forward", "holder"):
            _end(self.procs.get(name))
        self._remove_cgroups()
        self.procs.clear()
        self.timings["teardown"] = time.monotonic() - t0

    def our_pids(self) -> list[int]:
        """Processes whose command line names this node's directory (containerd's shims)."""
        mark = str(self.workdir).encode() + b"/"
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if mark in (d / "cmdline").read_bytes():
                        out.append(int(d.name))
        return out

    def _kill_cgroup_tasks(self) -> None:
        for _ in range(100):
            pids = self.cgroup_pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        raise RuntimeError(f"processes left in {self.cgroup_root}: {self.cgroup_pids()}")

    def cgroup_pids(self) -> set[int]:
        pids: set[int] = set()
        for h in cgroup_hierarchies():
            root = h / self.cgroup_root.lstrip("/")
            # os.walk, not rglob: the kubelet removes pod cgroups while we walk, and a
            # directory gone under rglob raises; os.walk skips it (onerror unset).
            for d, _dirs, files in os.walk(root):
                if "cgroup.procs" in files:
                    with contextlib.suppress(OSError):
                        pids |= {int(x) for x in Path(d, "cgroup.procs").read_text().split()}
        return pids

    def _remove_cgroups(self) -> None:
        for h in cgroup_hierarchies():
            root = h / self.cgroup_root.lstrip("/")
            if not root.exists():
                continue
            found = [Path(d) for d, _dirs, _files in os.walk(root) if Path(d) != root]
            dirs = sorted(found, key=lambda p: -len(p.parts))
            for d in [*dirs, root]:
                for _ in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)


def _end(p: subprocess.Popen[bytes] | None) -> None:
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _containerd_toml(root: Path, sock: Path, cni: Path) -> str:
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    return f"""version = 2
root = "{root}/root"
state = "{root}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
{cri}
  sandbox_image = "{pause_ref()}"
  # runc cannot lower the pause container's oom_score_adj without CAP_SYS_RESOURCE
  restrict_oom_score_adj = true
  enable_selinux = false
{cri[:-1]}.containerd]
  snapshotter = "native"
  default_runtime_name = "runc"
{cri[:-1]}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
{cri[:-1]}.containerd.runtimes.runc.options]
  SystemdCgroup = false
{cri[:-1]}.cni]
  bin_dir = "{CNI_DIR}"
  conf_dir = "{cni}"
"""


def pause_ref() -> str:
    return (BIN / "pause.tag").read_text().strip()


def _kubelet_config(node: Node, ca: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This CI's kernel has cgroup v1 (hybrid) and v2 cannot be switched on; v1 is
        # deprecated upstream and refused unless this is false.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup_root,
        "containerRuntimeEndpoint": f"unix://{node.sock}",
        "address": NODE_IP,
        "port": free_port(),
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": free_port(),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        # the host's sysctls: refuse to start rather than write one (they are bind-mounted
        # over in the node's mount namespace with the values the kubelet wants)
        "protectKernelDefaults": True,
        "failSwapOn": False,
        "podLogsDir": str(node.workdir / "pod-logs"),
        "resolvConf": "",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "nodeStatusUpdateFrequency": "2s",
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "serializeImagePulls": False,
        "registerNode": True,
        "localStorageCapacityIsolation": True,
    }
