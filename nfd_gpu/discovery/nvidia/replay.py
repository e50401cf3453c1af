"""A ``pynvml`` stand-in that replays recorded NVML answers from JSON.

- Same function names, return shapes and ``NVMLError`` subclasses as nvidia-ml-py 13.615.71.
  ``NVMLError(value)`` maps to ``NVMLError_<Name>``; structs have the pynvml field names.
- Used by ``nfd-gpu scan --root DIR`` when ``DIR/nvml.json`` exists.
- Used by tests through ``sys.modules["pynvml"]`` under the real adapter.

Recording format:

- Keys are pynvml function names.
- ``{"error": "GpuIsLost"}`` in place of a value makes the call raise that error.
- A missing key raises ``NotSupported``.

Example::

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

import contextlib
import ctypes
import json
import threading
import types
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from nfd_gpu.host import boundedfile

# System-level functions and functions of one device handle (physical GPU or MIG device)
# whose answers are recorded (record.py) and replayed as is: one list each, so the two can
# never disagree.
SYSTEM_FUNCTIONS = ("nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion")
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
    # health (discovery/nvidia/health.py)
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
# Functions of a device handle whose answer depends on their other arguments: recorded per
# argument list, ``{"<arg>,<arg>": answer}`` (``"nvmlDeviceGetNvLinkState": {"0": 1}``).
ARG_FUNCTIONS = ("nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetNvLinkState")


def arg_key(args: tuple[Any, ...]) -> str:
    return ",".join(str(int(a)) for a in args)


ERRORS = {
    "Uninitialized": (1, "Uninitialized"),
    "InvalidArgument": (2, "Invalid Argument"),
    "NotSupported": (3, "Not Supported"),
    "NoPermission": (4, "Insufficient Permissions"),
    "NotFound": (6, "Not Found"),
    "DriverNotLoaded": (9, "Driver Not Loaded"),
    "Timeout": (10, "Timeout"),
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
    """pynvml's fabric info struct, which ``nvmlDeviceGetGpuFabricInfo`` fills."""

    _fields_ = (
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint8),
    )


class Handle:
    """An opaque handle: device, MIG device, GPU instance or compute instance."""

    def __init__(self, data: dict[str, Any], parent: Handle | None = None) -> None:
        self.data = data
        self.parent = parent


def _raise(name: str) -> NoReturn:
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


class _Replay:
    """The replaying library: the recording, its device handles and the ``nvmlInit`` count.

    Its methods named like pynvml's functions become the module's functions: see :func:`build`.
    """

    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self.devices = [Handle(d) for d in recording.get("devices", [])]
        self.init = 0

    def need_init(self) -> None:
        if self.init <= 0:
            _raise("Uninitialized")

    def system(self, fn: str) -> Callable[[], Any]:
        """Replay the system-level function ``fn``, which takes no handle."""

        def call() -> Any:
            self.need_init()
            return _answer(self.recording, fn)

        call.__name__ = fn
        return call

    def device(self, fn: str) -> Callable[..., Any]:
        """Replay the per-handle function ``fn``: the answer recorded under its name."""

        def call(h: Handle, *args: Any) -> Any:
            self.need_init()
            return _answer(h.data, fn)

        call.__name__ = fn
        return call

    def by_args(self, fn: str) -> Callable[..., Any]:
        """Replay ``fn(handle, *args)``: the answer recorded for those arguments."""

        def call(h: Handle, *args: Any) -> Any:
            self.need_init()
            if "error" in h.data:
                _raise(str(h.data["error"]))
            answers = h.data.get(fn)
            if not isinstance(answers, dict):
                _raise("NotSupported")
            return _answer(answers, arg_key(args))

        call.__name__ = fn
        return call

    def nvmlInit(self) -> None:
        _check_error(self.recording.get("nvmlInit"))
        self.init += 1

    def nvmlShutdown(self) -> None:
        self.need_init()
        self.init -= 1

    def nvmlDeviceGetCount(self) -> int:
        self.need_init()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Handle:
        self.need_init()
        if not 0 <= i < len(self.devices):
            _raise("InvalidArgument")
        return self.devices[i]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Handle, j: int) -> Handle:
        self.need_init()
        if "error" in h.data:
            _raise(str(h.data["error"]))
        migs = h.data.get("migDevices", [])
        if not 0 <= j < len(migs) or migs[j] is None:
            _raise("NotFound")
        return Handle(migs[j], h)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: Handle, p: int, version: int = 2) -> Any:
        self.need_init()
        info = h.data.get("gpuInstanceProfiles", {}).get(str(p))
        if info is None:
            _raise("NotSupported")
        return _struct(info)

    def nvmlDeviceGetGpuInstanceById(self, h: Handle, gi: int) -> Handle:
        self.need_init()
        data = h.data.get("gpuInstances", {}).get(str(gi))
        if data is None:
            _raise("NotFound")
        return Handle(data, h)

    def nvmlGpuInstanceGetInfo(self, gi: Handle) -> Any:
        self.need_init()
        return types.SimpleNamespace(profileId=gi.data["profileId"])

    def nvmlGpuInstanceGetComputeInstanceById(self, gi: Handle, ci: int) -> Handle:
        self.need_init()
        data = gi.data.get("computeInstances", {}).get(str(ci))
        if data is None:
            _raise("NotFound")
        return Handle(data, gi)

    def nvmlComputeInstanceGetInfo(self, ci: Handle) -> Any:
        self.need_init()
        return types.SimpleNamespace(profileId=ci.data["profileId"])

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, gi: Handle, p: int, eng: int, version: int = 2
    ) -> Any:
        self.need_init()
        dev = gi.parent
        info = (dev.data if dev else {}).get("computeInstanceProfiles", {}).get(str(p))
        if info is None:
            _raise("NotSupported")
        return _struct(info)

    def nvmlDeviceGetGpuFabricInfo(self, h: Handle, ref: Any) -> int:
        self.need_init()
        data = _answer(h.data, "nvmlDeviceGetGpuFabricInfo")
        fill_struct(getattr(ref, "_obj", ref), vars(data))  # ctypes.byref(struct) or struct
        return 0


class _Events:
    """The replayed event set: the recording's ``"events"``, delivered in order.

    - Each event is ``{"device": <index>, "type": <nvmlEventType bits>, "data": <XID>}``.
    - Events go to the devices registered.
    - Then waits block for their timeout and raise ``Timeout``, as NVML's do.
    """

    def __init__(self, replay: _Replay) -> None:
        self.replay = replay
        self.queue = list(replay.recording.get("events", []))
        self.registered: set[int] = set()
        self.idle = threading.Event()  # never set: a wait that lasts its timeout

    def nvmlEventSetCreate(self) -> _Events:
        self.replay.need_init()
        return self

    def nvmlDeviceGetSupportedEventTypes(self, h: Handle) -> int:
        self.replay.need_init()
        return 0x8 | 0x2 | 0x1  # XID critical, double and single bit ECC

    def nvmlDeviceRegisterEvents(self, h: Handle, types: int, es: _Events) -> None:
        self.replay.need_init()
        if "error" in h.data:
            _raise(str(h.data["error"]))
        self.registered.add(self.replay.devices.index(h))

    def nvmlEventSetWait(self, es: _Events, timeout_ms: int) -> Any:
        self.replay.need_init()
        while self.queue:
            e = self.queue.pop(0)
            if e["device"] in self.registered:
                return types.SimpleNamespace(
                    device=self.replay.devices[e["device"]],
                    eventType=e["type"],
                    eventData=e["data"],
                    gpuInstanceId=0xFFFFFFFF,
                    computeInstanceId=0xFFFFFFFF,
                )
        self.idle.wait(timeout_ms / 1000)
        _raise("Timeout")

    def nvmlEventSetFree(self, es: _Events) -> None:
        self.replay.need_init()


EVENT_FUNCTIONS = (
    "nvmlEventSetCreate",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait",
    "nvmlEventSetFree",
)

# pynvml functions of handles, MIG devices and GPU / compute instances that the replay (and
# the recorder, record.py) implement one by one, besides the system and device ones above
HANDLE_FUNCTIONS = (
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlComputeInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
)
_METHODS = ("nvmlInit", "nvmlShutdown", *HANDLE_FUNCTIONS, "nvmlDeviceGetGpuFabricInfo")


def build(recording: dict[str, Any]) -> types.ModuleType:
    """Build a module with pynvml's API answering from ``recording``."""
    replay = _Replay(recording)
    mod = types.ModuleType("pynvml")
    mod.__dict__.update(
        NVMLError=NVMLError,
        c_nvmlGpuFabricInfo_t=c_nvmlGpuFabricInfo_t,
        NVML_DEVICE_MIG_DISABLE=0,
        NVML_DEVICE_MIG_ENABLE=1,
        NVML_ERROR_NOT_FOUND=6,
        NVML_ERROR_NOT_SUPPORTED=3,
        NVML_GPU_FABRIC_STATE_COMPLETED=3,
    )
    for name, cls in ERROR_CLASSES.items():
        mod.__dict__[f"NVMLError_{name}"] = cls
    for fn in SYSTEM_FUNCTIONS:
        mod.__dict__[fn] = replay.system(fn)
    for fn in DEVICE_FUNCTIONS:
        mod.__dict__[fn] = replay.device(fn)
    for fn in ARG_FUNCTIONS:
        mod.__dict__[fn] = replay.by_args(fn)
    for fn in _METHODS:
        mod.__dict__[fn] = getattr(replay, fn)
    events = _Events(replay)
    for fn in EVENT_FUNCTIONS:
        mod.__dict__[fn] = getattr(events, fn)
    return mod


def fill_struct(info: Any, values: dict[str, Any]) -> None:
    """Write recorded values into the struct the caller's library defines.

    The recording holds values, not one nvidia-ml-py version's layout:

    - a field the struct lacks is skipped;
    - a byte array is cut or zero-padded to the struct's length.
      One version records ``clusterUuid`` as 80 bytes, another defines 16.
      The first 16 are the UUID when the rest is zero.
      A shorter array is incomplete and left zero.
    """
    fields = getattr(type(info), "_fields_", None)
    names = {f[0] for f in fields} if fields is not None else None
    for k, v in values.items():
        if names is not None and k not in names:
            continue
        if isinstance(v, list):
            raw = bytes(int(x) & 0xFF for x in v)
            cur = getattr(info, k, None)
            if cur is not None and hasattr(cur, "__len__") and fields is not None:
                n = len(cur)
                # longer: the tail must be zero padding; shorter: incomplete, left zero
                cur[:] = list(raw[:n]) if len(raw) >= n and not any(raw[n:]) else [0] * n
            else:
                setattr(info, k, list(raw))
        elif fields is None:
            setattr(info, k, v)
        else:
            with contextlib.suppress(TypeError, ValueError):  # a member of another type here
                setattr(info, k, v)


# Bounds of a recording: read through HostRoot (never more than this), then validated.
MAX_RECORDING = 4 * 1024 * 1024
MAX_DEVICES = 1024
MAX_EVENTS = 10_000


class RecordingError(ValueError):
    """A recording that cannot be replayed; the message names the bad member."""


_STR_FNS = ("nvmlDeviceGetName", "nvmlDeviceGetUUID")
_INT_FNS = (
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetVirtualizationMode",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
_PAIR_FNS = ("nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMigMode")
_STRUCT_FNS: dict[str, dict[str, type]] = {  # function -> members that must be present
    "nvmlDeviceGetPciInfo": {"busId": str},
    "nvmlDeviceGetMemoryInfo": {"total": int},
    "nvmlDeviceGetAttributes": {},
    "nvmlDeviceGetGpuFabricInfo": {},
}


def _is_int(v: Any) -> bool:
    """Tell an unsigned integer: NVML's recorded integers are sizes, counts, ids, modes."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


def _is_error(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"error"} and isinstance(v["error"], str)


def _check_scalars(where: str, v: dict[str, Any]) -> None:
    for k, x in v.items():
        if isinstance(x, list):
            if len(x) > 256 or not all(_is_int(b) for b in x):
                raise RecordingError(f"{where}.{k}: expected a list of at most 256 integers")
        elif not (_is_int(x) or isinstance(x, (str, float)) or x is None):
            raise RecordingError(f"{where}.{k}: expected a number or a string")


def _check_profiles(where: str, v: Any, key: str) -> None:
    if not isinstance(v, dict):
        raise RecordingError(f"{where}: expected an object")
    for k, x in v.items():
        if not k.isdigit() or not isinstance(x, dict) or not _is_int(x.get(key)):
            raise RecordingError(f"{where}.{k}: expected an object with an integer {key!r}")


def _check_by_args(where: str, v: Any) -> None:
    if not isinstance(v, dict) or len(v) > 256:
        raise RecordingError(f"{where}: expected an object of answers by argument")
    for k, x in v.items():
        if not all(p.isdigit() for p in k.split(",")) or not (_is_int(x) or _is_error(x)):
            raise RecordingError(f"{where}.{k}: expected an integer answer")


def _check_device(where: str, d: Any, mig: bool) -> None:
    if not isinstance(d, dict):
        raise RecordingError(f"{where}: expected an object")
    for k, v in d.items():
        at = f"{where}.{k}"
        if k == "error":
            if not isinstance(v, str):
                raise RecordingError(f"{at}: expected an error name")
            continue
        if _is_error(v):
            continue
        if k in _STR_FNS and not isinstance(v, str):
            raise RecordingError(f"{at}: expected a string")
        if k in _INT_FNS and not _is_int(v):
            raise RecordingError(f"{at}: expected an integer")
        if k in _PAIR_FNS and not (
            isinstance(v, list) and len(v) == 2 and all(_is_int(x) for x in v)
        ):
            raise RecordingError(f"{at}: expected two integers")
        if k == "nvmlDeviceGetRemappedRows" and not (
            isinstance(v, list) and len(v) == 4 and all(_is_int(x) for x in v)
        ):
            raise RecordingError(f"{at}: expected four integers")
        if k in ARG_FUNCTIONS:
            _check_by_args(at, v)
        if k in _STRUCT_FNS:
            if not isinstance(v, dict):
                raise RecordingError(f"{at}: expected an object")
            _check_scalars(at, v)
            for member, kind in _STRUCT_FNS[k].items():
                if not isinstance(v.get(member), kind) or isinstance(v.get(member), bool):
                    raise RecordingError(f"{at}.{member}: expected a {kind.__name__}")
        if k in ("gpuInstanceProfiles", "computeInstanceProfiles"):
            _check_profiles(at, v, "id")
            for pk, pv in v.items():
                _check_scalars(f"{at}.{pk}", pv)
        if k == "gpuInstances":
            _check_profiles(at, v, "profileId")
            for gk, gv in v.items():
                _check_profiles(
                    f"{at}.{gk}.computeInstances", gv.get("computeInstances", {}), "profileId"
                )
        if k == "migDevices":
            if mig or not isinstance(v, list) or len(v) > MAX_DEVICES:
                raise RecordingError(f"{at}: expected a list of MIG devices")
            for j, m in enumerate(v):
                if m is not None:
                    _check_device(f"{at}[{j}]", m, True)


def validate(recording: Any) -> dict[str, Any]:
    """Return ``recording`` if it has the replay format's types, else raise :class:`RecordingError`.

    - Unknown members are ignored: a newer recorder may add some.
    - Known members must have their type, or be ``{"error": "<name>"}``.
    """
    if not isinstance(recording, dict):
        raise RecordingError("expected a JSON object at the top level")
    init = recording.get("nvmlInit")
    if init is not None and not _is_error(init):
        raise RecordingError('nvmlInit: expected {"error": "<name>"}')
    for fn, kind in (("nvmlSystemGetDriverVersion", str), ("nvmlSystemGetCudaDriverVersion", int)):
        v = recording.get(fn)
        bad = not isinstance(v, kind) or isinstance(v, bool) or (kind is int and not _is_int(v))
        if fn in recording and not _is_error(v) and bad:
            raise RecordingError(f"{fn}: expected a {kind.__name__}")
    devices = recording.get("devices", [])
    if not isinstance(devices, list) or len(devices) > MAX_DEVICES:
        raise RecordingError("devices: expected a list of devices")
    for i, d in enumerate(devices):
        _check_device(f"devices[{i}]", d, False)
    _check_events(recording.get("events", []), len(devices))
    return recording


def _check_events(events: Any, devices: int) -> None:
    if not isinstance(events, list) or len(events) > MAX_EVENTS:
        raise RecordingError(f"events: expected a list of at most {MAX_EVENTS} events")
    for i, e in enumerate(events):
        ok = isinstance(e, dict) and all(_is_int(e.get(k)) for k in ("device", "type", "data"))
        if not ok or e["device"] >= devices:
            raise RecordingError(
                f"events[{i}]: expected {{device: <index of a device>, type: <int>, data: <int>}}"
            )


def loads(data: bytes) -> types.ModuleType:
    """Build a replaying module from recorded JSON; :class:`RecordingError` when unusable."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RecordingError("not UTF-8") from None
    except RecursionError:
        raise RecordingError("nested too deeply") from None
    except ValueError as exc:
        raise RecordingError(f"not JSON ({exc})") from None
    return build(validate(doc))


def load(path: str) -> types.ModuleType:
    """Build a replaying module from the recording file ``path``, bounded by MAX_RECORDING."""
    try:
        data = boundedfile.read(path, MAX_RECORDING)
    except boundedfile.FileReadError as exc:
        raise RecordingError(str(exc)) from None
    return loads(data)
