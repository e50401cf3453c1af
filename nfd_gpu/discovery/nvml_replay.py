"""A ``pynvml`` stand-in that replays recorded NVML answers from JSON.

Same function names, return shapes and ``NVMLError`` subclasses as nvidia-ml-py 13.615.71
(``NVMLError(value)`` maps to ``NVMLError_<Name>``; structs have the pynvml field names).
Used by ``nfd-gpu scan --root DIR`` when ``DIR/nvml.json`` exists, and by tests through
``sys.modules["pynvml"]`` under the real adapter.

Recording format (keys are pynvml function names; ``{"error": "GpuIsLost"}`` in place of a
value makes the call raise that error; a missing key raises ``NotSupported``)::

    {"nvmlInit": {"error": "DriverNotLoaded"},           # optional
     "nvmlSystemGetDriverVersion": "550.54.15", "nvmlSystemGetCudaDriverVersion": 12040,
     "devices": [{"error": "GpuIsLost",                  # optional: every call raises
                  "nvmlDeviceGetName": "...", "nvmlDeviceGetPciInfo": {"busId": "..."},
                  "nvmlDeviceGetMemoryInfo": {"total": 85899345920}, ...,
                  "gpuInstanceProfiles": {"<enum>": {"id": 19, ...}},
                  "computeInstanceProfiles": {"<enum>": {"id": 0}},
                  "gpuInstances": {"<giId>": {"profileId": 19,
                                              "computeInstances": {"<ciId>": {"profileId": 0}}}},
                  "migDevices": [{"nvmlDeviceGetGpuInstanceId": 1, ...}, null],
                  "nvmlDeviceGetGpuFabricInfo": {"clusterUuid": [16 bytes], "cliqueId": 1,
                                                 "state": 3, "status": 0}}]}
"""

from __future__ import annotations

import ctypes
import json
import types
from typing import Any, ClassVar

# Functions of one device handle (physical GPU or MIG device) whose answers are recorded
# (nvml_record) and replayed as is: one list, so the two can never disagree.
DEVICE_FUNCTIONS = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetVirtualizationMode",
    "nvmlDeviceGetAttributes",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
)

ERRORS = {
    "Uninitialized": (1, "Uninitialized"),
    "InvalidArgument": (2, "Invalid Argument"),
    "NotSupported": (3, "Not Supported"),
    "NoPermission": (4, "Insufficient Permissions"),
    "NotFound": (6, "Not Found"),
    "DriverNotLoaded": (9, "Driver Not Loaded"),
    "LibraryNotFound": (12, "NVML Shared Library Not Found"),
    "FunctionNotFound": (13, "Function Not Found"),
    "GpuIsLost": (15, "GPU is lost"),
    "LibRmVersionMismatch": (18, "RM has detected an NVML/RM version mismatch."),
    "Unknown": (999, "Unknown Error"),
}


class NVMLError(Exception):
    _valClassMapping: ClassVar[dict[int, type[NVMLError]]] = {}
    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)

    def __str__(self) -> str:
        for code, text in ERRORS.values():
            if code == self.value:
                return text
        return f"NVML Error with code {self.value}"


def _error_class(name: str, code: int) -> type[NVMLError]:
    def new(cls: type[NVMLError], *args: Any) -> NVMLError:
        return NVMLError.__new__(cls, code)

    cls = type(f"NVMLError_{name}", (NVMLError,), {"__new__": new})
    NVMLError._valClassMapping[code] = cls
    return cls


ERROR_CLASSES = {name: _error_class(name, code) for name, (code, _) in ERRORS.items()}


class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    """pynvml's fabric info struct (``nvmlDeviceGetGpuFabricInfo`` fills it)."""

    _fields_ = (
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint8),
    )


class Handle:
    """An opaque handle (device, MIG device, GPU instance or compute instance)."""

    def __init__(self, data: dict[str, Any], parent: Handle | None = None) -> None:
        self.data = data
        self.parent = parent


def _raise(name: str) -> None:
    cls = ERROR_CLASSES.get(name, ERROR_CLASSES["Unknown"])
    raise cls(0)


def _struct(v: Any) -> Any:
    if isinstance(v, dict):
        return types.SimpleNamespace(**v)
    if isinstance(v, list):
        return list(v)
    return v


def _answer(data: dict[str, Any], fn: str) -> Any:
    if "error" in data:
        _raise(str(data["error"]))
    if fn not in data:
        _raise("NotSupported")
    v = data[fn]
    if isinstance(v, dict) and set(v) == {"error"}:
        _raise(str(v["error"]))
    return _struct(v)


def _check_error(v: Any) -> None:
    if isinstance(v, dict) and set(v) == {"error"}:
        _raise(str(v["error"]))


def build(recording: dict[str, Any]) -> types.ModuleType:
    """A module with pynvml's API answering from ``recording``."""
    mod = types.ModuleType("pynvml")
    mod.__dict__["NVMLError"] = NVMLError
    for name, cls in ERROR_CLASSES.items():
        mod.__dict__[f"NVMLError_{name}"] = cls
    mod.__dict__.update(
        NVML_DEVICE_MIG_DISABLE=0,
        NVML_DEVICE_MIG_ENABLE=1,
        NVML_ERROR_NOT_FOUND=6,
        NVML_ERROR_NOT_SUPPORTED=3,
    )
    devices = [Handle(d) for d in recording.get("devices", [])]
    state = {"init": 0}

    def need_init() -> None:
        if state["init"] <= 0:
            _raise("Uninitialized")

    def nvmlInit() -> None:
        _check_error(recording.get("nvmlInit"))
        state["init"] += 1

    def nvmlShutdown() -> None:
        need_init()
        state["init"] -= 1

    def system(fn: str) -> Any:
        def call() -> Any:
            need_init()
            return _answer(recording, fn)

        call.__name__ = fn
        return call

    def nvmlDeviceGetCount() -> int:
        need_init()
        return len(devices)

    def nvmlDeviceGetHandleByIndex(i: int) -> Handle:
        need_init()
        if not 0 <= i < len(devices):
            _raise("InvalidArgument")
        return devices[i]

    def device(fn: str) -> Any:
        def call(h: Handle, *args: Any) -> Any:
            need_init()
            return _answer(h.data, fn)

        call.__name__ = fn
        return call

    def nvmlDeviceGetMigDeviceHandleByIndex(h: Handle, j: int) -> Handle:
        need_init()
        if "error" in h.data:
            _raise(str(h.data["error"]))
        migs = h.data.get("migDevices", [])
        if not 0 <= j < len(migs) or migs[j] is None:
            _raise("NotFound")
        return Handle(migs[j], h)

    def nvmlDeviceGetGpuInstanceProfileInfo(h: Handle, p: int, version: int = 2) -> Any:
        need_init()
        info = h.data.get("gpuInstanceProfiles", {}).get(str(p))
        if info is None:
            _raise("NotSupported")
        return _struct(info)

    def nvmlDeviceGetGpuInstanceById(h: Handle, gi: int) -> Handle:
        need_init()
        data = h.data.get("gpuInstances", {}).get(str(gi))
        if data is None:
            _raise("NotFound")
        return Handle(data, h)

    def nvmlGpuInstanceGetInfo(gi: Handle) -> Any:
        need_init()
        return types.SimpleNamespace(profileId=gi.data["profileId"])

    def nvmlGpuInstanceGetComputeInstanceById(gi: Handle, ci: int) -> Handle:
        need_init()
        data = gi.data.get("computeInstances", {}).get(str(ci))
        if data is None:
            _raise("NotFound")
        return Handle(data, gi)

    def nvmlComputeInstanceGetInfo(ci: Handle) -> Any:
        need_init()
        return types.SimpleNamespace(profileId=ci.data["profileId"])

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        gi: Handle, p: int, eng: int, version: int = 2
    ) -> Any:
        need_init()
        dev = gi.parent
        info = (dev.data if dev else {}).get("computeInstanceProfiles", {}).get(str(p))
        if info is None:
            _raise("NotSupported")
        return _struct(info)

    def nvmlDeviceGetGpuFabricInfo(h: Handle, ref: Any) -> int:
        need_init()
        data = _answer(h.data, "nvmlDeviceGetGpuFabricInfo")
        info = getattr(ref, "_obj", ref)  # ctypes.byref(struct) or the struct itself
        for k, v in vars(data).items():
            if k == "clusterUuid":
                info.clusterUuid[:] = list(v)
            else:
                setattr(info, k, int(v))
        return 0

    mod.__dict__.update(
        c_nvmlGpuFabricInfo_t=c_nvmlGpuFabricInfo_t,
        nvmlDeviceGetGpuFabricInfo=nvmlDeviceGetGpuFabricInfo,
        NVML_GPU_FABRIC_STATE_COMPLETED=3,
    )
    for fn in ("nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion"):
        mod.__dict__[fn] = system(fn)
    for fn in DEVICE_FUNCTIONS:
        mod.__dict__[fn] = device(fn)
    mod.__dict__.update(
        nvmlInit=nvmlInit,
        nvmlShutdown=nvmlShutdown,
        nvmlDeviceGetCount=nvmlDeviceGetCount,
        nvmlDeviceGetHandleByIndex=nvmlDeviceGetHandleByIndex,
        nvmlDeviceGetMigDeviceHandleByIndex=nvmlDeviceGetMigDeviceHandleByIndex,
        nvmlDeviceGetGpuInstanceProfileInfo=nvmlDeviceGetGpuInstanceProfileInfo,
        nvmlDeviceGetGpuInstanceById=nvmlDeviceGetGpuInstanceById,
        nvmlGpuInstanceGetInfo=nvmlGpuInstanceGetInfo,
        nvmlGpuInstanceGetComputeInstanceById=nvmlGpuInstanceGetComputeInstanceById,
        nvmlComputeInstanceGetInfo=nvmlComputeInstanceGetInfo,
        nvmlGpuInstanceGetComputeInstanceProfileInfo=nvmlGpuInstanceGetComputeInstanceProfileInfo,
    )
    return mod


def load(path: str) -> types.ModuleType:
    with open(path, encoding="utf-8") as f:
        return build(json.load(f))
