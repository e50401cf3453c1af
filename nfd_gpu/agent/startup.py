"""The one line ``run`` logs at start, the NVML state it reports, the outputs' start-up steps.

The steps are deprecation warnings, and removing what an output no longer chosen left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat

from nfd_gpu import __version__
from nfd_gpu.config.loader import Config
from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING
from nfd_gpu.host import HostRoot
from nfd_gpu.sinks.registry import OUTPUTS, chosen

log = logging.getLogger("nfd_gpu.agent")

# Rules applied on every pass when --rules is not given (and the directory exists).
DEFAULT_RULES_DIR = "/etc/nfd-gpu/rules.d"


def nvml_state(mode: str, root: str) -> str:
    """The NVML a pass will ask, for the start-up line: the ``--nvml`` mode, then what it finds.

    - The library is tried once here: ``nvmlInit``, ``nvmlShutdown``.
    - Every pass reports its own source afterwards: "NVIDIA facts from".
    """
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

    missing = nvml.unusable()
    if missing is not None:
        return f"{mode}: library unavailable ({missing})"
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
    """Warn once per deprecated output asked for, by ``Output.deprecated``."""
    for out in cfg.outputs:
        why = OUTPUTS[out].deprecated
        if why:
            log.warning("--output %s is deprecated and goes in the next minor release: %s", out,
                        why)  # fmt: skip


def retire_outputs(cfg: Config) -> None:
    """Let each output not chosen remove what an earlier run published, by ``Output.retire``.

    A dry run changes nothing.
    """
    if cfg.dry_run:
        return
    for output in OUTPUTS.values():
        if output.name not in cfg.outputs and output.retire is not None:
            output.retire(cfg)
