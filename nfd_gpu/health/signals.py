"""The health signals: one row per reason a reader can report; the one owner of reasons.

:data:`SIGNALS` is what the rest is made of:

- :mod:`nfd_gpu.health`'s severities and thresholds;
- docs/health.md's signal table, ``scripts/health_docs.py``;
- the reason values the health metrics may carry, :func:`metric_reason`.

Readers stay per source: ``discovery/health.py``, ``discovery/nvidia/health.py``,
``discovery/amd/ras.py``, ``discovery/intel/sysfs.py``, the XID watcher. Each reason they
report is a row here; ``tests/health/test_signals.py`` checks every ``HealthReason`` they build.
"""

from __future__ import annotations

from nfd_gpu.record import Record, record

FAILED = "failed"
DEGRADED = "degraded"
NO_DRIVER = "no-driver"  # a state, not a fault: no driver bound, so nothing GPU-level read


@record(slots=False)
class Signal(Record):
    """One health reason: where it is read, what it means, what to do about it."""

    reason: str  # the fault's name (labels' health.reasons, metrics' reason)
    signal: str  # the signal it belongs to (Health.signals)
    source: str  # who reads it: NVML, NVML events, amdgpu, xe, PCI, the driver, the agent
    read: str  # what is read
    severity: str  # failed | degraded | no-driver, once its count reaches the threshold
    threshold: str  # the setting that sets the count ("" = 1, always on)
    meaning: str
    action: str


SIGNALS: tuple[Signal, ...] = (
    Signal(
        "not-answering", "nvml.device", "NVML",
        "a GPU the driver lists (procfs) that NVML does not answer for, or whose health "
        "calls fail (`GPU is lost`, `Unknown`)", FAILED, "",
        "the driver has the GPU but cannot use it (RmInitAdapter failed, GPU lost)",
        "read the kernel log (`NVRM:`); reset the GPU or reboot the node",
    ),
    Signal(
        "nvml-init-failed", "nvml.init", "NVML",
        "`nvmlInit` fails with the library present and the GPU bound to `nvidia`",
        FAILED, "",
        "the driver is bound but unusable: `Driver/library version mismatch`, no "
        "device answered, the driver failed to start the GPU",
        "match the user-space driver to the kernel module (reboot after an upgrade); "
        "check the kernel log for `RmInitAdapter failed`",
    ),
    Signal(
        "ecc-uncorrectable", "nvml.ecc", "NVML, amdgpu",
        "`nvmlDeviceGetTotalEccErrors(h, UNCORRECTED, VOLATILE)` since the driver "
        "loaded; amdgpu `ras/<block>_err_count` `ue:` summed", FAILED,
        "health_uncorrectable",
        "memory returned data ECC could not correct",
        "drain the node; reset the GPU (NVIDIA) or reboot; replace it if it recurs",
    ),
    Signal(
        "retired-pages-pending", "nvml.retired-pages", "NVML",
        "`nvmlDeviceGetRetiredPagesPendingStatus` (pre-Ampere)", FAILED, "",
        "a bad page waits for a GPU reset to be retired",
        "drain the node and reset the GPU",
    ),
    Signal(
        "row-remap-pending", "nvml.row-remap", "NVML",
        "`nvmlDeviceGetRemappedRows` -> `pending` (Ampere and later)", FAILED, "",
        "a row remap waits for a GPU reset",
        "drain the node and reset the GPU",
    ),
    Signal(
        "row-remap-failure", "nvml.row-remap", "NVML",
        "`nvmlDeviceGetRemappedRows` -> `failure`", FAILED, "",
        "no spare row was left to remap",
        "the GPU needs service (RMA)",
    ),
    Signal(
        "xid", "nvml.xid", "NVML events",
        "the XID watcher: a critical XID event, or a double-bit ECC event (XID 48)",
        FAILED, "health_nonfatal_xids",
        "the driver reported a GPU fault (48 DBE, 79 fallen off the bus, 94/95 ECC, ...)",
        "look the XID up in NVIDIA's XID catalog; reboot the node, or reset the GPU and "
        "bind its driver again (either clears it: \"Across restarts\")",
    ),
    Signal(
        "survivability-mode", "sysfs.survivability", "xe",
        "`device/survivability_mode` exists", FAILED, "",
        "the firmware needs a flash (boot or runtime survivability mode)",
        "flash the GPU firmware",
    ),
    Signal(
        "vram-bad-pages-failed", "sysfs.vram-bad-pages", "amdgpu",
        "`ras/gpu_vram_bad_pages` lines with flag `F`", FAILED, "",
        "a bad VRAM page could not be reserved",
        "drain the node; the GPU needs service",
    ),
    Signal(
        "vram-bad-pages-pending", "sysfs.vram-bad-pages", "amdgpu",
        "`ras/gpu_vram_bad_pages` lines with flag `P`", DEGRADED, "",
        "a bad VRAM page is reserved at the next window",
        "reboot or reload amdgpu when convenient",
    ),
    Signal(
        "correctable", "sysfs.ras", "amdgpu",
        "`ras/<block>_err_count` `ce:` summed", DEGRADED, "health_correctable",
        "corrected memory errors (ECC did its job)",
        "watch the rate; set `health_correctable` to what is worse than usual",
    ),
    Signal(
        "aer-fatal", "sysfs.aer", "PCI",
        "`aer_dev_fatal` `TOTAL_ERR_FATAL`", FAILED, "",
        "a fatal PCIe error on the GPU's link",
        "reboot; reseat the card or check the riser if it recurs",
    ),
    Signal(
        "aer-fatal-port", "sysfs.aer", "PCI",
        "the GPU's upstream port's `aer_dev_fatal` `TOTAL_ERR_FATAL`", FAILED, "",
        "the port above the GPU saw a fatal error on the GPU's link (Surprise Down: the "
        "link went down; the driver cannot recover the GPU)",
        "reboot; reseat the card or check the riser and slot if it recurs",
    ),
    Signal(
        "aer-nonfatal", "sysfs.aer", "PCI",
        "`aer_dev_nonfatal` `TOTAL_ERR_NONFATAL`", DEGRADED, "",
        "a non-fatal uncorrectable PCIe error (a transaction was lost)",
        "watch it; check the link if it grows",
    ),
    Signal(
        "aer-correctable", "sysfs.aer", "PCI",
        "`aer_dev_correctable` `TOTAL_ERR_COR`", DEGRADED, "health_correctable",
        "corrected PCIe errors (replayed TLPs; common on healthy links)",
        "set `health_correctable` to what is worse than usual",
    ),
    Signal(
        "clock-hw-slowdown", "nvml.clock-events", "NVML",
        "`nvmlDeviceGetCurrentClocksEventReasons` bit `0x8`", DEGRADED, "",
        "clocks held down by hardware (thermal, power brake or an external signal)",
        "check cooling and power",
    ),
    Signal(
        "clock-hw-thermal", "nvml.clock-events", "NVML",
        "`nvmlDeviceGetCurrentClocksEventReasons` bit `0x40`", DEGRADED, "",
        "clocks held down: the GPU is too hot", "check cooling",
    ),
    Signal(
        "clock-power-brake", "nvml.clock-events", "NVML",
        "`nvmlDeviceGetCurrentClocksEventReasons` bit `0x80`", DEGRADED, "",
        "clocks held down by the power brake signal", "check the power supply",
    ),
    Signal(
        "nvlink-down", "nvml.nvlink", "NVML",
        "`nvmlDeviceGetNvLinkState(h, link)`: links down beside links up", DEGRADED, "",
        "NVLink bandwidth is lost", "reset the GPU; check the NVLink bridge / NVSwitch",
    ),
    Signal(
        "pcie-width", "sysfs.pcie-link", "PCI",
        "`current_link_width` below `max_link_width` (the value: lanes lost)", DEGRADED, "",
        "the link trained narrower than the GPU supports: bandwidth lost",
        "reseat the card; check the slot and riser",
    ),
    Signal(
        "no-driver", "sysfs.driver", "PCI",
        "the GPU's function has no `driver` link", NO_DRIVER, "",
        "no driver bound yet (driver container not started, or not installed): "
        "nothing GPU-level can be read, so neither `ok` nor `failed`",
        "install or start the driver (the taint rule never fires while a GPU has none)",
    ),
    Signal(
        "lost", "agent.boot-set", "the agent",
        "a GPU of the agent's first complete pass that is gone from the bus",
        FAILED, "",
        "the GPU fell off the bus (XID 79, link failure, surprise removal)",
        "reboot the node; check the slot, power and riser",
    ),
)  # fmt: skip

BY_REASON: dict[str, Signal] = {s.reason: s for s in SIGNALS}

# Known XIDs, the codes NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors,
# "Analyzing Xid Errors with the Xid Catalog") and the device plugin's skipped list name
# (docs/health.md): a series each in ``nfd_gpu_xid_events_total`` and ``health.reasons``;
# any other code is one ``other`` series, so a storm of made-up codes stays bounded.
KNOWN_XIDS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "GPU recovery action changed",
}
OTHER_XID = "other"


def xid_key(code: int) -> str:
    """An XID's metric label value: its code when known, else ``other``."""
    return str(code) if code in KNOWN_XIDS else OTHER_XID


def metric_reason(reason: str, value: int) -> str:
    """A fault's name in metrics and labels: its reason.

    An XID is ``xid-<code>``; ``xid-other`` for a code not in :data:`KNOWN_XIDS`.
    """
    return f"xid-{xid_key(value)}" if reason == "xid" else reason
