"""The agent: scan, then publish, once or forever, as ``nfd-gpu run``.

- ``loop.py``     the Agent: passes, timer, signals, reload, back-off
- ``publish.py``  one publication to every sink; the "published ..." change line
- ``outputs.py``  the sinks a configuration asks for
- ``lastvalid.py`` last valid configuration wins: stale files, said once
- ``rulefiles.py`` the rules, file by file, each at its last valid version
- ``startup.py``  the start-up line and the NVML state it reports
- ``udev.py``     rescans on PCI/DRM hot-plug (pyudev)
- ``logs.py``     text or JSON log records, uncaught exceptions logged

Every part logs as ``nfd_gpu.agent``.
"""

from __future__ import annotations

from nfd_gpu.agent.logs import JsonFormatter, setup_logging
from nfd_gpu.agent.loop import STOP_GRACE, Agent
from nfd_gpu.agent.outputs import build_sinks
from nfd_gpu.agent.publish import Publisher, label_changes
from nfd_gpu.agent.startup import DEFAULT_RULES_DIR, nvml_state, startup_line
from nfd_gpu.agent.udev import UdevTrigger

__all__ = [
    "DEFAULT_RULES_DIR",
    "STOP_GRACE",
    "Agent",
    "JsonFormatter",
    "Publisher",
    "UdevTrigger",
    "build_sinks",
    "label_changes",
    "nvml_state",
    "setup_logging",
    "startup_line",
]
