"""The one line ``run`` logs at start, and the NVML state it reports."""

from __future__ import annotations

import contextlib
import os

from nfd_gpu import __version__
from nfd_gpu.config import Config
from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING

# Rules applied on every pass when --rules is not given (and the directory exists).
DEFAULT_RULES_DIR = "/etc/nfd-gpu/rules.d"


def nvml_state(mode: str, root: str) -> str:
    """The NVML a pass will ask (``--nvml`` mode, then what it finds), for the start-up line.
    The library is tried once here (``nvmlInit``/``nvmlShutdown``); every pass reports its
    own source afterwards ("NVIDIA facts from")."""
    if mode == "off":
        return "off"
    from nfd_gpu.discovery.nvidia import nvml  # lazy: the NVML adapter only when NVML is on

    rec = os.path.join(root, NVML_RECORDING)
    if os.path.isfile(rec):
        return f"{mode}: replay {rec}"

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
    if "featurefile" in cfg.outputs:
        parts.append(f"features={os.path.join(cfg.features_dir, cfg.features_file)}")
    if "nodefeature" in cfg.outputs:
        parts.append(f"nodefeature={cfg.namespace}/nfd-gpu-{cfg.node_name}")
    parts.append(f"rules={cfg.rules or DEFAULT_RULES_DIR + ' (if present)'}")
    parts.append(f"metrics={cfg.metrics_address or 'off'}")
    return " ".join(parts)
