"""NVML health signals of one GPU: memory errors, row remapping, clock event reasons, NVLink.

- The NVML adapter, :mod:`~nfd_gpu.discovery.nvidia.nvml`, calls it on each device handle.
- It returns the signals it could read and the faults found,
  :class:`~nfd_gpu.model.HealthReason`. :mod:`nfd_gpu.health` judges them later.
- A call the GPU does not support is a signal not read, never a fault. Such a call
  raises ``NotSupported`` or ``FunctionNotFound``, or asks for a link number past its links.

pynvml names, of nvidia-ml-py 13.615:

- ``nvmlDeviceGetTotalEccErrors(h, errorType, counterType)``;
- ``nvmlDeviceGetRetiredPagesPendingStatus(h)``;
- ``nvmlDeviceGetRemappedRows(h)`` -> correctable, uncorrectable, pending, failure;
- ``nvmlDeviceGetCurrentClocksEventReasons(h)``, ``...ClocksThrottleReasons`` before R535;
- ``nvmlDeviceGetNvLinkState(h, link)``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from nfd_gpu.model import HealthReason

# nvml.h enum values (stable across NVML versions)
MEMORY_ERROR_TYPE_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
VOLATILE_ECC = 0  # NVML_VOLATILE_ECC: since the last driver load
MAX_LINKS = 64  # bound on NVML_NVLINK_MAX_LINKS (18 in NVML 12, 36 in 13); stops earlier
# nvmlClocksEventReason* bits: HW slowdown (thermal, power brake or an external signal),
# its thermal and power-brake causes (nvml.h "Clocks Event Reasons").
CLOCK_EVENTS: tuple[tuple[int, str], ...] = (
    (0x08, "clock-hw-slowdown"),
    (0x40, "clock-hw-thermal"),
    (0x80, "clock-power-brake"),
)
_NOT_READ = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLError_InvalidArgument")


def _not_read(exc: BaseException) -> bool:
    return any(c.__name__ in _NOT_READ for c in type(exc).__mro__)


class _Reader:
    def __init__(self, lib: ModuleType, h: Any) -> None:
        self.lib, self.h = lib, h
        self.signals: list[str] = []
        self.reasons: list[HealthReason] = []

    def call(self, fn: str, *args: Any) -> Any:
        """The answer, or None when this GPU cannot answer it; other errors propagate."""
        f = getattr(self.lib, fn, None)
        if f is None:
            return None
        try:
            return f(self.h, *args)
        except self.lib.NVMLError as exc:
            if _not_read(exc):
                return None
            raise

    def fault(self, reason: str, value: int = 1) -> None:
        if value > 0:
            self.reasons.append(HealthReason(reason, "nvml", value))


def _memory(r: _Reader) -> None:
    ecc = r.call("nvmlDeviceGetTotalEccErrors", MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC)
    if ecc is not None:
        r.signals.append("nvml.ecc")
        r.fault("ecc-uncorrectable", int(ecc))
    pending = r.call("nvmlDeviceGetRetiredPagesPendingStatus")
    if pending is not None:
        r.signals.append("nvml.retired-pages")
        r.fault("retired-pages-pending", int(pending))
    rows = r.call("nvmlDeviceGetRemappedRows")
    if rows is not None and len(rows) == 4:
        r.signals.append("nvml.row-remap")
        r.fault("row-remap-pending", int(rows[2]))
        r.fault("row-remap-failure", int(rows[3]))


def _clocks(r: _Reader) -> None:
    mask = r.call("nvmlDeviceGetCurrentClocksEventReasons")
    if mask is None:
        mask = r.call("nvmlDeviceGetCurrentClocksThrottleReasons")
    if mask is None:
        return
    r.signals.append("nvml.clock-events")
    for bit, reason in CLOCK_EVENTS:
        r.fault(reason, 1 if int(mask) & bit else 0)


def _nvlink(r: _Reader) -> None:
    """Links down beside links up.

    - A GPU whose NVLinks are all down, or that has none, shows no fault.
    - A PCIe-only board looks the same.
    - The agent cannot tell one from the other without a link it saw up.
    """
    states: list[int] = []
    for link in range(min(int(getattr(r.lib, "NVML_NVLINK_MAX_LINKS", 18)), MAX_LINKS)):
        s = r.call("nvmlDeviceGetNvLinkState", link)
        if s is None:
            break
        states.append(int(s))
    if not states:
        return
    r.signals.append("nvml.nvlink")
    if any(states):
        r.fault("nvlink-down", states.count(0))


NOT_ANSWERING = HealthReason("not-answering", "nvml")
INIT_FAILED = HealthReason("nvml-init-failed", "nvml")  # nvmlInit failed, GPU bound to nvidia


def read(lib: ModuleType, h: Any) -> tuple[tuple[str, ...], tuple[HealthReason, ...]]:
    """The health signals read on device handle ``h`` and the faults found.

    A GPU whose health calls fail otherwise is ``not-answering``: ``GPU is lost``, ``Unknown``.
    """
    r = _Reader(lib, h)
    try:
        _memory(r)
        _clocks(r)
        _nvlink(r)
    except lib.NVMLError:
        return ("nvml.device", *r.signals), (*r.reasons, NOT_ANSWERING)
    return ("nvml.device", *r.signals), tuple(r.reasons)
