"""A real Kubernetes control plane on loopback for the e2e tests.

etcd (``go.etcd.io/etcd/server/v3``) and ``kube-apiserver`` (``k8s.io/kubernetes``), both
built by ``tests/e2e/build.sh``, RBAC on, with a CA, serving certificate, admin client certificate
and service-account signing key generated per run, and an audit log of every request.
``Cluster.request`` is a small REST client (urllib) used by the tests as the admin or as a
bearer token; nothing here models Kubernetes behaviour, the server does.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

E2E = Path(__file__).resolve().parent
BIN = E2E / "bin"
BINARIES = ("etcd", "kube-apiserver", "kubectl", "nfd-master", "nfd-worker")
DATA = ("nfd-api-crds.yaml", "nfd-deployment", "podmonitor-crd.yaml")

Obj = dict[str, Any]


def missing_components() -> list[str]:
    """What ``tests/e2e/build.sh`` has not provided yet."""
    return [str(BIN / n) for n in BINARIES + DATA if not (BIN / n).exists()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- certificates ------------------------------------------------------------------------


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _cert(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    issuer_key: rsa.RSAPrivateKey,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if not ca:
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else None
        b = b.add_extension(
            x509.ExtendedKeyUsage([usage or x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False,
        )
    return b.sign(issuer_key, hashes.SHA256())


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


SERVICE_IP = "10.96.0.1"  # the ``kubernetes`` Service: first address of the Service range


def client_cert(d: Path, name: str, cn: str, org: str | None = None) -> None:
    """``name``.{crt,key} under ``d``: a client certificate for ``cn`` (``org``) signed by
    ``d``'s CA (:func:`write_pki`)."""
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    key = _key()
    cert = _cert(_name(cn, org), key, ca.subject, ca_key, client=True)
    (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / f"{name}.key").write_bytes(_pem_key(key))


def write_pki(d: Path) -> None:
    """ca.{crt,key}, apiserver.{crt,key}, admin.{crt,key}, sa.{key,pub} under ``d`` (the
    serving certificate names 127.0.0.1 and the ``kubernetes`` Service's IP, 10.96.0.1, which
    tests/node's pods reach it by)."""
    import ipaddress

    d.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("nfd-gpu-e2e-ca")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    srv_key = _key()
    srv = _cert(
        _name("kube-apiserver"),
        srv_key,
        ca_name,
        ca_key,
        sans=[
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
            x509.IPAddress(ipaddress.IPv4Address(SERVICE_IP)),
        ],
    )
    adm_key = _key()
    adm = _cert(_name("e2e-admin", "system:masters"), adm_key, ca_name, ca_key, client=True)
    sa_key = _key()
    pem = serialization.Encoding.PEM
    (d / "ca.crt").write_bytes(ca.public_bytes(pem))
    (d / "ca.key").write_bytes(_pem_key(ca_key))  # tests/node signs its kubelet's certificate
    (d / "apiserver.crt").write_bytes(srv.public_bytes(pem))
    (d / "apiserver.key").write_bytes(_pem_key(srv_key))
    (d / "admin.crt").write_bytes(adm.public_bytes(pem))
    (d / "admin.key").write_bytes(_pem_key(adm_key))
    (d / "sa.key").write_bytes(_pem_key(sa_key))
    (d / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


# What the tests read from the audit log: every request of a ServiceAccount (the agent)
# and every request on Nodes (nfd-master's writes). The server's own loopback traffic and
# the rest stay out, so the log stays small.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "Metadata", "resources": [{"group": "", "resources": ["nodes"]}]},
        {"level": "None"},
    ],
}


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{status}: {msg}")
        self.status = status
        self.body = body


@dataclass
class Cluster:
    """A running etcd + kube-apiserver; ``stop()`` ends both."""

    workdir: Path
    node_authorizer: bool = False  # Node,RBAC and NodeRestriction, for a real kubelet (tests/node)
    apiserver: Path = BIN / "kube-apiserver"  # tests/node runs its kubelet's version
    url: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _audit: list[Obj] = field(default_factory=list)
    _audit_offset: int = 0

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    # -- lifecycle --------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> Cluster:
        write_pki(self.pki)
        client, peer = free_port(), free_port()
        etcd_log = (self.workdir / "etcd.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [
                    str(BIN / "etcd"),
                    "--name=e2e",
                    f"--data-dir={self.workdir / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                    "--log-level=warn",
                ],
                stdout=etcd_log,
                stderr=subprocess.STDOUT,
            )
        )
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        p = self.pki
        api_log = (self.workdir / "kube-apiserver.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [
                    str(self.apiserver),
                    f"--etcd-servers=http://127.0.0.1:{client}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    # no Endpoints for the "kubernetes" Service: loopback is not allowed there
                    "--endpoint-reconciler-type=none",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / 'certs'}",
                    f"--tls-cert-file={p / 'apiserver.crt'}",
                    f"--tls-private-key-file={p / 'apiserver.key'}",
                    f"--client-ca-file={p / 'ca.crt'}",
                    *(
                        [
                            "--authorization-mode=Node,RBAC",
                            "--enable-admission-plugins=NodeRestriction",
                        ]
                        if self.node_authorizer
                        else ["--authorization-mode=RBAC"]
                    ),
                    f"--service-account-key-file={p / 'sa.pub'}",
                    f"--service-account-signing-key-file={p / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    "--service-cluster-ip-range=10.96.0.0/24",
                    f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                    f"--audit-log-path={self.audit_log}",
                    "--audit-log-mode=blocking",
                    "--v=1",
                ],
                stdout=api_log,
                stderr=subprocess.STDOUT,
            )
        )
        self._write_admin_kubeconfig()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc, name in zip(self.procs, ("etcd", "kube-apiserver"), strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log_tail(name)}")
            try:
                self.request("GET", "/readyz")
                # RBAC's bootstrap roles are in place once this is readable.
                self.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin")
                return
            except (ApiError, OSError) as e:
                last = str(e)
            time.sleep(0.5)
        raise RuntimeError(f"kube-apiserver not ready in {timeout}s ({last}):\n{self.log_tail()}")

    def log_tail(self, name: str = "kube-apiserver", lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()

    # -- clients ----------------------------------------------------------------------

    def _write_admin_kubeconfig(self) -> None:
        self.write_kubeconfig(
            self.admin_kubeconfig,
            {
                "client-certificate": str(self.pki / "admin.crt"),
                "client-key": str(self.pki / "admin.key"),
            },
        )

    def write_kubeconfig(self, path: Path, user: dict[str, str]) -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(self.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "u"}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(cfg))
        return path

    def _ssl(self, token: str | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if token is None:
            ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        raw: bool = False,
    ) -> Any:
        """One API request as the admin (client certificate) or as ``token``; returns the
        decoded JSON answer (or text; ``raw``: the text as sent), raises ``ApiError`` on a
        non-2xx status."""
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, context=self._ssl(token), timeout=30) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                raise ApiError(e.code, json.loads(text)) from None
            except ValueError:
                raise ApiError(e.code, text) from None
        if raw:
            return text
        try:
            return json.loads(text)
        except ValueError:
            return text

    # -- helpers ----------------------------------------------------------------------

    def apply(self, obj: Obj, *, dry_run: bool = False, manager: str = "e2e") -> Obj:
        """Server-side apply of one object (``dry_run``: validated and admitted, not stored)."""
        params = {"fieldManager": manager, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        out: Obj = self.request(
            "PATCH",
            object_path(obj),
            json.dumps(obj),
            params=params,
            content_type="application/apply-patch+yaml",
        )
        return out

    def audit_events(self) -> list[Obj]:
        """Every audit event so far (the log is read incrementally)."""
        if self.audit_log.exists():
            with self.audit_log.open("rb") as f:
                f.seek(self._audit_offset)
                data = f.read()
            end = data.rfind(b"\n") + 1  # whole lines only
            self._audit_offset += end
            self._audit.extend(json.loads(line) for line in data[:end].splitlines() if line)
        return list(self._audit)

    def wait_crds(self, names: list[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
        pending = list(names)
        while pending and time.monotonic() < deadline:
            crd = self.request("GET", base + pending[0])
            conds = {
                c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []
            }
            if conds.get("Established") == "True":
                pending.pop(0)
            else:
                time.sleep(0.2)
        if pending:
            raise RuntimeError(f"CRDs not established: {pending}")
        # discovery of the new groups lags behind Established a little
        time.sleep(1.0)


# Resource paths for the kinds the tests use (no discovery client needed).
KINDS: dict[str, tuple[str, str, bool]] = {
    # kind: (api prefix incl. group/version, plural, namespaced)
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "DaemonSet": ("/apis/apps/v1", "daemonsets", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "ValidatingAdmissionPolicy": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        False,
    ),
    "ValidatingAdmissionPolicyBinding": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
    "CustomResourceDefinition": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    "NodeFeature": ("/apis/nfd.k8s-sigs.io/v1alpha1", "nodefeatures", True),
    "NodeFeatureRule": ("/apis/nfd.k8s-sigs.io/v1alpha1", "nodefeaturerules", False),
    "NodeFeatureGroup": ("/apis/nfd.k8s-sigs.io/v1alpha1", "nodefeaturegroups", True),
    "PodMonitor": ("/apis/monitoring.coreos.com/v1", "podmonitors", True),
    "ServiceMonitor": ("/apis/monitoring.coreos.com/v1", "servicemonitors", True),
    "PrometheusRule": ("/apis/monitoring.coreos.com/v1", "prometheusrules", True),
    "Service": ("/api/v1", "services", True),
}


def collection_path(kind: str, namespace: str | None = None) -> str:
    prefix, plural, namespaced = KINDS[kind]
    if namespaced:
        assert namespace, f"{kind} needs a namespace"
        return f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{prefix}/{plural}"


def object_path(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{collection_path(obj['kind'], meta.get('namespace'))}/{meta['name']}"


def load_yaml_docs(path: Path) -> Iterator[Obj]:
    with path.open(encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if doc:
                yield doc


def nodefeature_agent_args(root: str, kubeconfig: Path, *extra: str) -> list[str]:
    """``nfd-gpu run`` arguments of an agent that publishes ``root``'s NodeFeature with
    ``kubeconfig``'s credentials, then ``extra`` (no udev: the e2e agents run outside a Pod)."""
    return [
        "--output", "nodefeature", "--root", root, "--no-udev", *extra,
        "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip


def nodefeature_oneshot_args(root: str, node: str, namespace: str, kubeconfig: Path) -> list[str]:
    """``nfd-gpu`` arguments for one NodeFeature pass of ``root`` as ``node``'s agent
    (no owner lookup either)."""
    return [
        "run", "--oneshot",
        *nodefeature_agent_args(root, kubeconfig, "--owner-refs", "", "--node-name", node,
                                "--namespace", namespace),
    ]  # fmt: skip


def container_env(pod: Obj, container: Obj) -> dict[str, str]:
    """The environment ``container`` of ``pod`` gets: its values, and its downward-API
    fields (``fieldRef``) resolved from the pod the way the kubelet fills them in."""
    downward = {
        "spec.nodeName": pod["spec"]["nodeName"],
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"]["uid"],
    }
    return {
        e["name"]: e["value"] if "value" in e else downward[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for e in container.get("env", [])
    }


def daemonset_pod(
    ds: Obj, spec: Obj, labels: dict[str, str] | None = None, name: str | None = None
) -> Obj:
    """A Pod of ``ds`` as the DaemonSet controller creates it: ``spec``, a generated name
    (or ``name``), ``ds`` as its controlling owner."""
    meta: Obj = {
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": ds["metadata"]["name"],
                "uid": ds["metadata"]["uid"],
                "controller": True,
            }
        ],
    }
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{ds['metadata']['name']}-"
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
