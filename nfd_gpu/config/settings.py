"""Every setting of ``nfd-gpu run``, declared once: :class:`Config`.

Each field is one setting:

- its name is the config-file key;
- its annotation is the type, and its default the default;
- its :class:`Setting` holds the rest: flag, downward-API variable, choices, help texts.

Derived from it:

- ``run``'s options and ``scan``'s shared ones, in ``nfd_gpu/cli/options.py``;
- the ``NFD_GPU_<KEY>`` environment, and the config file's keys and types,
  in ``nfd_gpu/config/loader.py``;
- the table in docs/configuration.md, by ``scripts/config_docs.py``. A test keeps it current.

Help texts may name placeholders of their setting. :func:`fill` writes them in when help is shown.

- ``{default}``;
- ``{choices}``, as ``a, b, c``, and ``{choices_or}``, as ``a, b or c``;
- ``{others}``: the choices but the default;
- ``{k8s_env}``.

This module imports no other ``nfd_gpu`` module at load time.
Every ``nfd-gpu`` command reads it to build the CLI.
The choices that label and sink code own load only when needed:
profile names, MIG strategies, outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from nfd_gpu.record import Record, record

T = TypeVar("T")

DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d/"
OWNER_REF_KINDS = ("pod", "ds")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
ENV_PREFIX = "NFD_GPU_"
CONFIG_ENV = "NFD_GPU_CONFIG"  # the config file; not a setting itself
OBJECT_PREFIX = "nfd-gpu-"  # the NodeFeature object is named <prefix><node name>
DAY = 86400.0
WEEK = 7 * DAY
YEAR = 365 * DAY

Choices = tuple[str, ...] | Callable[[], tuple[str, ...]]


@record(slots=False)
class Setting(Record):
    """What a setting shows besides its name, type and default.

    - ``run_help`` None: no ``run`` flag; the downward API sets it.
    - ``flags`` empty: ``--<key-with-dashes>``, and ``--x/--no-x`` for booleans.
    - ``scan_help`` set: ``scan`` has the option too, reading ``NFD_GPU_<KEY>`` itself.
    - ``scan_flags`` empty: ``flags``.
    - ``bounds``: the range of a number, in ``unit``. The unit is seconds unless said.
    """

    doc: str
    run_help: str | None
    flags: tuple[str, ...] = ()
    scan_help: str | None = None
    scan_flags: tuple[str, ...] = ()
    k8s_env: str | None = None
    choices: Choices | None = None
    # (lowest, highest) allowed, both included, for a number (every number has one): a
    # value outside is refused when the configuration is validated, the range in the
    # message (an interval of 1e10 s overflowed the timer after the first pass)
    bounds: tuple[float, float] | None = None
    unit: str = "seconds"


def setting(default: T, meta: Setting) -> T:
    return dataclasses.field(default=default, metadata={"setting": meta})


def _error_limit(default: float, doc: str, run_help: str) -> float:
    """Return a health setting: the count of errors at which a GPU's state changes; 0 is off."""
    return setting(default, Setting(doc, run_help, bounds=(0.0, 1e9), unit="errors"))


def lazy_setting(factory: Callable[[], T], meta: Setting) -> T:
    """Return a setting whose default another module owns; it is read when a Config is made."""
    return dataclasses.field(default_factory=factory, metadata={"setting": meta})


def _profile_names() -> tuple[str, ...]:
    from nfd_gpu.labels import registry  # lazy: the label code loads when a command runs

    return tuple(registry.PROFILES)


def _default_profiles() -> tuple[str, ...]:
    from nfd_gpu.labels import registry  # lazy: as above

    return registry.DEFAULT


def _output_names() -> tuple[str, ...]:
    from nfd_gpu.sinks import registry  # lazy: as above (the sink modules)

    return tuple(registry.OUTPUTS)


def _mig_strategies() -> tuple[str, ...]:
    """Return GFD's strategies, none first as its default, then nfd-gpu's own: auto."""
    # lazy: as above (the options' module: listing scan's options loads no profile code)
    from nfd_gpu.labels.nvidia_options import GFD_MIG_STRATEGIES, MIG_STRATEGIES

    return (*GFD_MIG_STRATEGIES, *(s for s in MIG_STRATEGIES if s not in GFD_MIG_STRATEGIES))


def _nvml_modes() -> tuple[str, ...]:
    from nfd_gpu.discovery.nvidia.session import NVML_MODES  # lazy: as above

    return NVML_MODES


_NVML_DOC = (
    "NVML use: `auto` (ROOT/nvml.json recording, else the pynvml library, else procfs), `on` "
    "(required: a pass where NVML does not answer is not published), `off` (docs/nvidia.md)"
)
_GFD_TIMESTAMP_DOC = (
    "nvidia profile: emit `nvidia.com/gfd.timestamp`, the agent's start time (Unix seconds) "
    "set once, so unchanged passes still write nothing; off because every restart then "
    "rewrites the node object (docs/nvidia.md)"
)
_DRY_RUN_DOC = (
    "print what each output would write to stdout instead of writing (NodeFeature YAML "
    "with `ownerReferences: []`: the DaemonSet's uid needs the API; the feature file after "
    "a `# would write <path>` line); needs no cluster: the node name defaults to the host "
    "name (lower-case, as the kubelet's), the namespace to `nfd-gpu`"
)


@record(slots=False)
class Config(Record):
    """Settings of the agent; see the module docstring. Env is ``NFD_GPU_<UPPER>``."""

    interval: float = setting(
        60.0,
        Setting(
            "seconds between passes",
            "Seconds between passes (default {default})",
            bounds=(0.1, DAY),
        ),
    )
    oneshot: bool = setting(False, Setting("one pass, publish, exit", "One pass, publish, exit"))
    outputs: tuple[str, ...] = setting(
        ("featurefile",),
        Setting(
            "sinks: {choices} (several allowed; `hook` is deprecated: NFD v0.17 dropped hooks)",
            "{choices} (hook: deprecated); repeat or comma-separate (default {default})",
            flags=("--output", "-o"),
            choices=_output_names,
        ),
    )
    root: str = setting(
        "/",
        Setting(
            "host root to scan",
            "Host root to scan (default {default})",
            scan_help="Host root to read sys/, proc/, dev/, etc/ from (a fixture or capture in "
            "tests).",
        ),
    )
    profiles: tuple[str, ...] = lazy_setting(
        _default_profiles,
        Setting(
            "label profiles",
            "Label profile(s) (default {default})",
            flags=("--profile",),
            scan_help="Label profile (repeatable or comma-separated): {default} (default), "
            "{others}.",
            scan_flags=("--profile", "-p"),
            choices=_profile_names,
        ),
    )
    profile_options: tuple[str, ...] = setting(
        (),
        Setting(
            "opt-in label groups of the profiles (below)",
            "Opt-in label group of a profile (repeatable): amd-beta, ...",
            flags=("--profile-option",),
            scan_help="Opt-in label group of a profile (repeatable): amd-beta, "
            "amd-driver-version, ...",
        ),
    )
    mig_strategy: str | None = setting(
        None,
        Setting(
            "nvidia profile MIG strategy: {choices_or}; not given: the sharing config's "
            "`flags.migStrategy`, else none (GFD's default; docs/nvidia.md)",
            "nvidia profile MIG strategy: {choices_or} (not given: the sharing config's, "
            "else none)",
            scan_help="nvidia profile MIG strategy: {choices_or} (not given: the sharing "
            "config's flags.migStrategy, else none, as GFD).",
            choices=_mig_strategies,
        ),
    )
    sharing_config: str | None = setting(
        None,
        Setting(
            "device-plugin config file for the nvidia profile (sharing; re-read every pass, a "
            "bad file warns)",
            "Device-plugin sharing config file (nvidia profile)",
            scan_help="Device-plugin config file (sharing.timeSlicing/mps replicas, "
            "flags.migStrategy).",
        ),
    )
    gfd_timestamp: bool = setting(
        False,
        Setting(
            _GFD_TIMESTAMP_DOC,
            "nvidia profile: emit gfd.timestamp, fixed at agent start (default {default})",
            scan_help="nvidia profile: emit gfd.timestamp (this run's start, Unix seconds).",
            scan_flags=("--gfd-timestamp",),
        ),
    )
    nvml: str = setting(
        "auto",
        Setting(
            _NVML_DOC,
            "NVML: auto (recording, else library, else procfs; default), on, off",
            scan_help="NVML: auto (ROOT/nvml.json, else pynvml, else procfs), on (required: "
            "exit 1 when NVML does not answer), off.",
            choices=_nvml_modes,
        ),
    )
    rules: str | None = setting(
        None,
        Setting(
            "NodeFeatureRule file or directory; unset, `run` applies `/etc/nfd-gpu/rules.d` "
            "when that directory exists on the machine it runs on (not under `--root`; the "
            "image has none, deploy/ passes `--rules`), `scan` applies none",
            "NodeFeatureRule file or directory (default /etc/nfd-gpu/rules.d if it exists)",
            scan_help="NodeFeatureRule file or directory to apply.",
        ),
    )
    features_dir: str = setting(
        DEFAULT_FEATURES_DIR,
        Setting(
            "feature-file directory; with a `root` other than `/` there is no default (the "
            "host's directory is not the scanned root's)",
            "Feature-file directory (default {default}; required with a --root other than /)",
        ),
    )
    features_file: str = setting(
        "nfd-gpu", Setting("feature-file name", "Feature-file name (default {default})")
    )
    expiry: float = setting(
        3600.0,
        Setting(
            "seconds until feature-file labels expire",
            "Feature-file expiry in seconds (default {default})",
            bounds=(1.0, YEAR),
        ),
    )
    raw_features: bool = setting(
        False,
        Setting(
            "also write raw features as '# +no-label' lines", "Write raw features as '# +no-label'"
        ),
    )
    remove_on_exit: bool = setting(
        False,
        Setting(
            "remove the feature file on exit",
            "Remove the feature file on exit",
            flags=("--remove-on-exit/--keep-on-exit",),
        ),
    )
    node_name: str | None = setting(
        None, Setting("node name", "Node name (env {k8s_env})", k8s_env="NODE_NAME")
    )
    namespace: str | None = setting(
        None,
        Setting(
            "namespace of the NodeFeature object",
            "NodeFeature namespace (env {k8s_env})",
            k8s_env="POD_NAMESPACE",
        ),
    )
    pod_name: str | None = setting(
        None, Setting("own pod name (owner reference)", None, k8s_env="POD_NAME")
    )
    pod_uid: str | None = setting(
        None, Setting("own pod uid (owner reference)", None, k8s_env="POD_UID")
    )
    owner_refs: tuple[str, ...] = setting(
        OWNER_REF_KINDS,
        Setting(
            "owner references: {choices} (empty list disables)",
            "Owner references: '{default}' (default), '' for none",
            choices=OWNER_REF_KINDS,
        ),
    )
    kubeconfig: str | None = setting(
        None,
        Setting(
            "kubeconfig path (default: in-cluster, then ~/.kube/config)",
            "kubeconfig (default: in-cluster)",
            k8s_env="KUBECONFIG",
        ),
    )
    api_timeout: float = setting(
        10.0,
        Setting(
            "API request timeout in seconds",
            "API request timeout seconds (default {default})",
            bounds=(0.1, 600.0),
        ),
    )
    resync_interval: float = setting(
        3600.0,
        Setting(
            "seconds a watch on the own NodeFeature lasts (jittered; a resync GET period "
            "without the watch verb)",
            "NodeFeature watch / resync period seconds (default {default})",
            bounds=(1.0, WEEK),
        ),
    )
    metrics_address: str = setting(
        "",
        Setting(
            "host:port for /metrics /healthz /readyz /startedz; empty disables",
            "host:port for /metrics /healthz /readyz /startedz (default: off)",
        ),
    )
    log_format: str = setting(
        "text", Setting("{choices_or}", "{choices_or} (default {default})", choices=LOG_FORMATS)
    )
    log_level: str = setting(
        "info", Setting("{choices}", "{choices} (default {default})", choices=LOG_LEVELS)
    )
    udev: bool = setting(
        True,
        Setting(
            "trigger passes on pci/drm udev events when available",
            "Rescan on pci/drm udev events (default {default})",
        ),
    )
    udev_debounce: float = setting(
        2.0,
        Setting(
            "seconds of quiet after a udev event before a pass",
            "Quiet seconds after a udev event (default {default})",
            bounds=(0.0, 600.0),
        ),
    )
    health_hold_passes: float = setting(
        3.0,
        Setting(
            "passes a GPU's health must read better before its state improves (a fault that "
            "toggles keeps its state; docs/health.md)",
            "Passes before a GPU's health improves (default {default})",
            bounds=(0.0, 10000.0),
            unit="passes",
        ),
    )
    health_nonfatal_xids: tuple[str, ...] = setting(
        ("13", "31", "43", "45", "68", "109"),
        Setting(
            "XIDs that do not fail a GPU (default: the NVIDIA device plugin's application "
            "errors); every other critical XID does",
            "XIDs that do not fail a GPU (default {default})",
        ),
    )
    health_uncorrectable: float = _error_limit(
        1.0,
        "uncorrectable memory errors (NVML volatile ECC, AMD RAS ue) that fail a GPU; 0 off",
        "Uncorrectable errors that fail a GPU (default {default}; 0 off)",
    )
    health_correctable: float = _error_limit(
        0.0,
        "correctable errors (AMD RAS ce, PCIe AER correctable) that degrade a GPU; 0 off",
        "Correctable errors that degrade a GPU (default {default}: off)",
    )
    dry_run: bool = setting(
        False,
        Setting(
            _DRY_RUN_DOC,
            "Print what each output would write (NodeFeature YAML, feature file) to stdout "
            "instead of writing; no cluster needed (node name: --node-name, NODE_NAME or the "
            "host name)",
        ),
    )


FIELDS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in dataclasses.fields(Config)}
SETTINGS: dict[str, Setting] = {k: f.metadata["setting"] for k, f in FIELDS.items()}

# how a value of each annotation is read from the environment or the config file
_KINDS = {
    "float": "float",
    "bool": "bool",
    "tuple[str, ...]": "list",
    "str": "str",
    "str | None": "str",
}
KINDS: dict[str, str] = {k: _KINDS[str(f.type)] for k, f in FIELDS.items()}


def env_var(key: str) -> str:
    return ENV_PREFIX + key.upper()


def flags(key: str) -> tuple[str, ...]:
    """Return ``run``'s option names of a setting."""
    explicit = SETTINGS[key].flags
    if explicit:
        return explicit
    dashed = key.replace("_", "-")
    return (f"--{dashed}/--no-{dashed}",) if KINDS[key] == "bool" else (f"--{dashed}",)


def default(key: str) -> Any:
    f = FIELDS[key]
    return f.default_factory() if callable(f.default_factory) else f.default


def choices(key: str) -> tuple[str, ...]:
    c = SETTINGS[key].choices
    return () if c is None else c() if callable(c) else c


def words(items: tuple[str, ...], last: str = "or") -> str:
    """Join choices as ``a, b or c``."""
    return f"{', '.join(items[:-1])} {last} {items[-1]}" if len(items) > 1 else "".join(items)


def shown(value: Any) -> str:
    """Write a default as help texts do: 60, on/off, a,b."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None else str(value)


def fill(text: str, key: str) -> str:
    """Return a help text of setting ``key`` with its placeholders written in: see the module."""
    if "{" not in text:
        return text
    cs, dflt = choices(key), default(key)
    chosen = dflt if isinstance(dflt, tuple) else (dflt,)
    return text.format(
        default=shown(dflt),
        choices=", ".join(cs),
        choices_or=words(cs),
        others=", ".join(c for c in cs if c not in chosen),
        k8s_env=SETTINGS[key].k8s_env,
    )
