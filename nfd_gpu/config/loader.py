"""Load the configuration of ``nfd-gpu run`` from defaults, a YAML file, the environment and flags.

The settings are declared in :mod:`nfd_gpu.config.settings`.

Precedence, lowest first:

1. built-in defaults;
2. the YAML config file;
3. the Kubernetes downward-API environment: ``NODE_NAME``, ``POD_NAMESPACE``, ``POD_NAME``,
   ``POD_UID``, ``KUBECONFIG``;
4. the ``NFD_GPU_<KEY>`` environment;
5. command-line flags.

Every key is documented in ``docs/configuration.md``, generated from the same declaration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from nfd_gpu.config import yamlfile
from nfd_gpu.config.settings import (
    CONFIG_ENV,
    ENV_PREFIX,
    KINDS,
    SETTINGS,
    Config,
    choices,
)
from nfd_gpu.health import HealthOptions
from nfd_gpu.labels.options import check
from nfd_gpu.names import PREFIX_MAX, is_dns1123_label, is_dns1123_subdomain
from nfd_gpu.record import replace
from nfd_gpu.sinks.kubeclient import NODE_NAME_MAX
from nfd_gpu.sinks.nodefeature import hostname_node_name
from nfd_gpu.sinks.registry import chosen

__all__ = ["Config", "ConfigError", "hostname_node_name", "load", "split_address"]

_POD_UID = re.compile(r"[A-Za-z0-9-]{1,128}")  # a UUID, as the API server writes it


class ConfigError(ValueError):
    """A user-caused configuration problem; the message is one line naming the source."""


# key -> kind ("float", "bool", "list", "str"): the keys of the file and of NFD_GPU_<KEY>
KEYS: dict[str, str] = KINDS

# Standard Kubernetes env (downward API), below NFD_GPU_* in precedence.
STANDARD_ENV: dict[str, str] = {s.k8s_env: k for k, s in SETTINGS.items() if s.k8s_env}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _coerce(key: str, value: Any, source: str) -> Any:
    kind = KEYS[key]
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
                if isinstance(v, int) and not isinstance(v, bool):
                    v = str(v)  # a YAML number: an XID of health_nonfatal_xids
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


_FILE_WORDING = {
    "read": "cannot read config file: {detail}",
    "yaml": "invalid YAML{at}",
    "mapping": "expected a mapping of settings at the top level",
}


def read_file(path: str) -> dict[str, Any]:
    """Read a YAML config file into coerced key/values."""
    try:
        data = yamlfile.load_mapping(path, _FILE_WORDING)
    except yamlfile.YamlFileError as e:
        raise ConfigError(str(e)) from None
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = str(k).replace("-", "_")
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown setting {k!r}")
        out[key] = _coerce(key, v, path)
    return out


def read_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Read the standard downward-API variables, then ``NFD_GPU_*``, which win."""
    out: dict[str, Any] = {}
    for var, key in STANDARD_ENV.items():
        if env.get(var):
            out[key] = env[var]
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV:
            continue
        key = var[len(ENV_PREFIX) :].lower()
        if key not in KEYS:
            raise ConfigError(f"environment: unknown variable {var}")
        out[key] = _coerce(key, value, f"environment {var}")
    return out


def _validate(cfg: Config) -> None:
    def bad(msg: str) -> ConfigError:
        return ConfigError(f"configuration: {msg}")

    for key, setting in SETTINGS.items():
        if setting.bounds is not None:
            low, high = setting.bounds
            value = getattr(cfg, key)
            if not low <= value <= high:  # NaN too
                raise bad(f"{key} must be from {low:g} to {high:g} {setting.unit}, got {value:g}")
    if not cfg.outputs:
        raise bad("at least one output is required")
    for key, setting in SETTINGS.items():  # every setting with choices, each list item
        if setting.choices is None:
            continue
        value = getattr(cfg, key)
        allowed = choices(key)
        for v in value if isinstance(value, tuple) else () if value is None else (value,):
            if v not in allowed:
                raise bad(f"{key}: unknown value {v!r} (choose from {', '.join(allowed)})")
    problem = check(cfg.profile_options, cfg.profiles)
    if problem:
        raise bad(problem)
    # a duplicated output is two sinks on one file or object, each repairing the other's
    # writes as changes made behind its back (the chart's schema refuses it too)
    for key in ("outputs", "owner_refs"):
        values = getattr(cfg, key)
        if len(set(values)) != len(values):
            raise bad(f"{key} has duplicates")
    for output in chosen(cfg.outputs):  # each chosen output's own checks
        problem = output.check(cfg)
        if problem:
            raise bad(problem)
    if cfg.metrics_address:
        split_address(cfg.metrics_address)
    try:  # the health thresholds as the agent reads them: whole numbers, XID numbers
        health_options(cfg)
    except ValueError as exc:
        raise bad(str(exc)) from None
    _validate_names(cfg)


def health_options(cfg: Config) -> HealthOptions:
    """Return the health thresholds of ``cfg``.

    Raises ValueError where one is bad; a validated configuration has none.
    """
    return HealthOptions.from_settings(
        cfg.health_hold_passes,
        cfg.health_nonfatal_xids,
        cfg.health_uncorrectable,
        cfg.health_correctable,
    )


def _validate_names(cfg: Config) -> None:
    """Check the downward-API names, NODE_NAME, POD_NAMESPACE, ..., as Kubernetes writes them.

    A value with a ``/``, ``..`` or a newline is refused. It is shown escaped, never raw.
    """
    checks = (
        ("node_name", cfg.node_name, lambda v: is_dns1123_subdomain(v) and len(v) <= NODE_NAME_MAX,
         f"a lower-case DNS-1123 subdomain of at most {NODE_NAME_MAX} characters"),
        ("namespace", cfg.namespace, is_dns1123_label,
         "a lower-case DNS-1123 label of at most 63 characters"),
        ("pod_name", cfg.pod_name, is_dns1123_subdomain,
         f"a lower-case DNS-1123 subdomain of at most {PREFIX_MAX} characters"),
        ("pod_uid", cfg.pod_uid, lambda v: _POD_UID.fullmatch(v) is not None,
         "at most 128 letters, digits and '-' (a UUID)"),
    )  # fmt: skip
    for key, value, ok, rule in checks:
        if value is not None and not ok(value):
            raise ConfigError(f"configuration: {key} {value!r} is not {rule}")


def split_address(address: str) -> tuple[str, int]:
    """Split ``host:port`` or ``:port`` into host and port; an empty host means all interfaces."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"configuration: metrics_address {address!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


def load(
    config_path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Config:
    """Build the Config: defaults < file < env < flags; flags with value None are unset."""
    env = os.environ if env is None else env
    path = config_path or env.get(CONFIG_ENV) or None
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
    for output in chosen(values.get("outputs", Config.outputs)):  # what it fills in
        values.update(output.fill(values))
    cfg = replace(Config(), **values)
    _validate(cfg)
    return cfg
