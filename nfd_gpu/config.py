"""One configuration object for ``nfd-gpu run``.

Precedence, lowest first: built-in defaults < YAML config file < Kubernetes downward-API
environment (``NODE_NAME``, ``POD_NAMESPACE``, ``POD_NAME``, ``POD_UID``, ``KUBECONFIG``)
< ``NFD_GPU_<KEY>`` environment < command-line flags.

Every key is documented in ``docs/configuration.md``; :data:`KEYS` is the single table the
loader, the env reader and the docs test use.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d/"
OUTPUTS = ("featurefile", "nodefeature", "hook")
OWNER_REF_KINDS = ("pod", "ds")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
MIG_STRATEGIES = ("auto", "none", "single", "mixed")  # nfd_gpu.labels.nvidia.MIG_STRATEGIES
NVML_MODES = ("auto", "on", "off")  # nfd_gpu.discovery.nvidia.session.NVML_MODES
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DRY_RUN_NAMESPACE = "nfd-gpu"  # the namespace deploy/ installs into


class ConfigError(ValueError):
    """A user-caused configuration problem; the message is one line naming the source."""


@dataclass(frozen=True)
class Config:
    """Settings of the agent. Field names are the YAML keys; env is ``NFD_GPU_<UPPER>``."""

    interval: float = 60.0
    oneshot: bool = False
    outputs: tuple[str, ...] = ("featurefile",)
    root: str = "/"
    profiles: tuple[str, ...] = ("neutral",)
    profile_options: tuple[str, ...] = ()
    mig_strategy: str = "none"
    sharing_config: str | None = None
    gfd_timestamp: bool = False
    nvml: str = "auto"
    rules: str | None = None
    features_dir: str = DEFAULT_FEATURES_DIR
    features_file: str = "nfd-gpu"
    expiry: float = 3600.0
    raw_features: bool = False
    remove_on_exit: bool = False
    node_name: str | None = None
    namespace: str | None = None
    pod_name: str | None = None
    pod_uid: str | None = None
    owner_refs: tuple[str, ...] = ("pod", "ds")
    kubeconfig: str | None = None
    api_timeout: float = 10.0
    resync_interval: float = 3600.0
    metrics_address: str = ""
    log_format: str = "text"
    log_level: str = "info"
    udev: bool = True
    udev_debounce: float = 2.0
    dry_run: bool = False

    @property
    def object_name(self) -> str:
        """Name of this node's NodeFeature object."""
        return f"nfd-gpu-{self.node_name}"


# key -> (kind, help). kind drives parsing of env/YAML values.
KEYS: dict[str, tuple[str, str]] = {
    "interval": ("float", "seconds between passes"),
    "oneshot": ("bool", "one pass, publish, exit"),
    "outputs": ("list", "sinks: featurefile, nodefeature, hook (several allowed)"),
    "root": ("str", "host root to scan"),
    "profiles": ("list", "label profiles"),
    "profile_options": ("list", "opt-in label groups of the profiles (amd-beta, ...)"),
    "mig_strategy": ("str", "nvidia profile MIG strategy: none (default), single, mixed, auto"),
    "sharing_config": ("str", "device-plugin config file for the nvidia profile (sharing)"),
    "gfd_timestamp": ("bool", "nvidia profile: emit gfd.timestamp (agent start, Unix seconds)"),
    "nvml": ("str", "NVML use: auto (recording, else library, else procfs), on (required), off"),
    "rules": ("str", "NodeFeatureRule file or directory"),
    "features_dir": ("str", "feature-file directory"),
    "features_file": ("str", "feature-file name"),
    "expiry": ("float", "seconds until feature-file labels expire"),
    "raw_features": ("bool", "also write raw features as '# +no-label' lines"),
    "remove_on_exit": ("bool", "remove the feature file on exit"),
    "node_name": ("str", "node name"),
    "namespace": ("str", "namespace of the NodeFeature object"),
    "pod_name": ("str", "own pod name (owner reference)"),
    "pod_uid": ("str", "own pod uid (owner reference)"),
    "owner_refs": ("list", "owner references: pod, ds (empty list disables)"),
    "kubeconfig": ("str", "kubeconfig path (default: in-cluster, then ~/.kube/config)"),
    "api_timeout": ("float", "API request timeout in seconds"),
    "resync_interval": ("float", "seconds between NodeFeature resync GETs (jittered)"),
    "metrics_address": ("str", "host:port for /metrics /healthz /readyz; empty disables"),
    "log_format": ("str", "text or json"),
    "log_level": ("str", "debug, info, warning, error"),
    "udev": ("bool", "trigger passes on pci/drm udev events when available"),
    "udev_debounce": ("float", "seconds of quiet after a udev event before a pass"),
    "dry_run": ("bool", "print what each output would write instead of writing; no cluster"),
}

# Standard Kubernetes env (downward API), below NFD_GPU_* in precedence.
STANDARD_ENV = {
    "NODE_NAME": "node_name",
    "POD_NAMESPACE": "namespace",
    "POD_NAME": "pod_name",
    "POD_UID": "pod_uid",
    "KUBECONFIG": "kubeconfig",
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _coerce(key: str, value: Any, source: str) -> Any:
    kind = KEYS[key][0]
    where = f"{source}: {key}"
    if kind == "float":
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if kind == "list":
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",")]
        elif isinstance(value, list | tuple):
            items = []
            for v in value:
                if not isinstance(v, str):
                    raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
                items.extend(s.strip() for s in v.split(","))
        else:
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        return tuple(i for i in items if i)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return str(value)


def read_file(path: str) -> dict[str, Any]:
    """Read a YAML config file into coerced key/values."""
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{at}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = str(k).replace("-", "_")
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown setting {k!r}")
        out[key] = _coerce(key, v, path)
    return out


def read_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Standard downward-API variables, then ``NFD_GPU_*`` (which win)."""
    out: dict[str, Any] = {}
    for var, key in STANDARD_ENV.items():
        if env.get(var):
            out[key] = env[var]
    for var, value in env.items():
        if not var.startswith("NFD_GPU_") or var == "NFD_GPU_CONFIG":
            continue
        key = var[len("NFD_GPU_") :].lower()
        if key not in KEYS:
            raise ConfigError(f"environment: unknown variable {var}")
        out[key] = _coerce(key, value, f"environment {var}")
    return out


def _validate(cfg: Config) -> None:
    def bad(msg: str) -> ConfigError:
        return ConfigError(f"configuration: {msg}")

    if not cfg.interval > 0:
        raise bad(f"interval must be > 0, got {cfg.interval}")
    if not cfg.outputs:
        raise bad("at least one output is required")
    for o in cfg.outputs:
        if o not in OUTPUTS:
            raise bad(f"unknown output {o!r} (choose from {', '.join(OUTPUTS)})")
    from nfd_gpu.labels import registry  # light: no vendor library is imported

    unknown = registry.unknown(cfg.profiles)
    if unknown is not None:
        raise bad(f"unknown label profile {unknown!r} (choose from {registry.known()})")
    from nfd_gpu.labels.options import check

    problem = check(cfg.profile_options, cfg.profiles)
    if problem:
        raise bad(problem)
    for o in cfg.owner_refs:
        if o not in OWNER_REF_KINDS:
            raise bad(f"unknown owner reference {o!r} (choose from {', '.join(OWNER_REF_KINDS)})")
    if len(set(cfg.owner_refs)) != len(cfg.owner_refs):
        raise bad("owner_refs has duplicates")
    if cfg.mig_strategy not in MIG_STRATEGIES:
        raise bad(
            f"mig_strategy must be one of {', '.join(MIG_STRATEGIES)}, got {cfg.mig_strategy!r}"
        )
    if cfg.nvml not in NVML_MODES:
        raise bad(f"nvml must be one of {', '.join(NVML_MODES)}, got {cfg.nvml!r}")
    if cfg.log_format not in LOG_FORMATS:
        raise bad(f"log_format must be text or json, got {cfg.log_format!r}")
    if cfg.log_level not in LOG_LEVELS:
        raise bad(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {cfg.log_level!r}")
    if "featurefile" in cfg.outputs:
        if not cfg.oneshot and cfg.expiry < 2 * cfg.interval:
            raise bad(f"expiry ({cfg.expiry}s) must be at least twice the interval")
        name = cfg.features_file
        if not name or "/" in name or name.startswith("."):
            raise bad(f"features_file {name!r} must be a plain file name not starting with '.'")
    if "nodefeature" in cfg.outputs:
        if not cfg.node_name:
            raise bad("the nodefeature output needs a node name (NODE_NAME or --node-name)")
        if not cfg.namespace:
            raise bad("the nodefeature output needs a namespace (POD_NAMESPACE or --namespace)")
    if cfg.resync_interval <= 0 or cfg.api_timeout <= 0 or cfg.udev_debounce < 0:
        raise bad("resync_interval and api_timeout must be > 0, udev_debounce >= 0")
    if cfg.metrics_address:
        split_address(cfg.metrics_address)


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``:port`` -> (host, port); an empty host means all interfaces."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"configuration: metrics_address {address!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def hostname_node_name() -> str | None:
    """The kubelet's default node name: the host name, lower-cased (``--hostname-override``
    aside); None when it is not a valid object-name part."""
    import re
    import socket

    name = socket.gethostname().strip().lower()
    ok = re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name)
    return name if ok and len(name) <= 253 - len("nfd-gpu-") else None


def _namespace_fallback() -> str | None:
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def load(
    config_path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Config:
    """Build the Config: defaults < file < env < flags (flags with value None are unset)."""
    env = os.environ if env is None else env
    path = config_path or env.get("NFD_GPU_CONFIG") or None
    values: dict[str, Any] = {}
    if path:
        values.update(read_file(path))
    values.update(read_env(env))
    for k, v in (flags or {}).items():
        if v is None:
            continue
        if k not in KEYS:
            raise ConfigError(f"flags: unknown setting {k!r}")
        values[k] = _coerce(k, v, "flag")
    if "nodefeature" in values.get("outputs", ()) and not values.get("namespace"):
        ns = _namespace_fallback()
        if ns:
            values["namespace"] = ns
    if values.get("dry_run") and "nodefeature" in values.get("outputs", ()):
        # Printing the object needs no cluster: name it after this host as the kubelet does.
        values["node_name"] = values.get("node_name") or hostname_node_name()
        values["namespace"] = values.get("namespace") or DRY_RUN_NAMESPACE
    cfg = dataclasses.replace(Config(), **values)
    _validate(cfg)
    return cfg
