"""Rescan on hot-plug: kernel uevents of the pci and drm subsystems.

pyudev is imported lazily, and only by this module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("nfd_gpu.agent")  # one logger for the agent's lines (docs/operations.md)


class UdevTrigger:
    """Calls ``callback()`` on kernel uevents of the pci and drm subsystems."""

    SUBSYSTEMS = ("pci", "drm")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self._observer: Any = None

    def on_event(self, action: str | None, subsystem: str | None) -> None:
        if subsystem in self.SUBSYSTEMS:
            log.debug("udev %s event on %s", action, subsystem)
            self.callback()

    def start(self) -> bool:
        try:
            import pyudev as _pyudev  # lazy: pyudev (libudev) only when the trigger starts

            pyudev: Any = _pyudev
            monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="kernel")
            for sub in self.SUBSYSTEMS:
                monitor.filter_by(sub)
            observer = pyudev.MonitorObserver(
                monitor, callback=lambda dev: self.on_event(dev.action, dev.subsystem)
            )
            observer.daemon = True
            observer.start()
        except Exception as e:  # ImportError, no netlink permission, no libudev
            log.warning("udev trigger unavailable, using the timer only: %s", e)
            return False
        self._observer = observer
        log.info("udev trigger on %s", ", ".join(self.SUBSYSTEMS))
        return True

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.send_stop()
