"""Record NVML answers while the real adapter runs, in the replay format of ``replay``.

- :func:`wrap` returns a module with pynvml's API.
- It forwards every call to the wrapped library: real ``pynvml``, or a fake one in tests.
- It writes each answer, or the error it raised, into :attr:`Recording.data`.
- Saved as ``nvml.json`` in a snapshot, it makes ``nfd-gpu scan --root DIR`` give the same
  NVML facts without NVML.

Errors are recorded by class name: ``NVMLError_GpuIsLost`` -> ``{"error": "GpuIsLost"}``.
A failed profile-info probe is left out. The replay answers ``NotSupported`` for it.
The adapter treats that like ``InvalidArgument``: profile not supported.
"""

from __future__ import annotations

import ctypes
import types
from collections.abc import Callable
from typing import Any

from nfd_gpu.discovery.nvidia.replay import (
    ARG_FUNCTIONS,
    DEVICE_FUNCTIONS,
    EVENT_FUNCTIONS,
    HANDLE_FUNCTIONS,
    SYSTEM_FUNCTIONS,
    arg_key,
)

CONSTANT_PREFIXES = ("NVML_", "c_nvmlGpuFabricInfo_t")


def encode(v: Any, depth: int = 0) -> Any:
    """Return a JSON value for a pynvml answer: structs -> dicts, bytes -> str, tuples -> lists."""
    if depth > 8:
        return None
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [encode(x, depth + 1) for x in v]
    fields = getattr(v, "_fields_", None)
    if fields is not None:
        return {f[0]: encode(getattr(v, f[0], None), depth + 1) for f in fields}
    if isinstance(v, types.SimpleNamespace):
        return {k: encode(x, depth + 1) for k, x in vars(v).items()}
    value = getattr(v, "value", None)  # ctypes scalars
    if isinstance(value, (int, float, bytes, str)):
        return encode(value, depth + 1)
    try:
        return [encode(x, depth + 1) for x in v]  # ctypes arrays
    except TypeError:
        return str(v)


def error_name(exc: BaseException) -> str:
    name = type(exc).__name__
    return name.removeprefix("NVMLError_") if name.startswith("NVMLError_") else "Unknown"


class Handle:
    """A wrapped handle: the library's own handle plus where its answers are recorded."""

    __slots__ = ("data", "parent", "real")

    def __init__(self, real: Any, data: dict[str, Any], parent: Handle | None = None) -> None:
        self.real = real
        self.data = data
        self.parent = parent


class Recording:
    """The recorded answers, ``data``, and the wrapping module, ``module``.

    - Its methods named like pynvml's functions become the module's functions: see ``_build``.
    - Each forwards to the wrapped library and records the answer where the replay looks.
    """

    def __init__(self, lib: types.ModuleType) -> None:
        self.lib = lib
        self.data: dict[str, Any] = {}
        self._handles: dict[int, Handle] = {}  # device index -> its wrapped handle
        self.module = self._build()

    def _call(self, where: dict[str, Any], key: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            value = fn(*args)
        except self.lib.NVMLError as exc:
            where[key] = {"error": error_name(exc)}
            raise
        where[key] = encode(value)
        return value

    def _build(self) -> types.ModuleType:
        lib = self.lib
        mod = types.ModuleType("pynvml")
        for name, value in vars(lib).items():
            if name.startswith(CONSTANT_PREFIXES) or name.startswith("NVMLError"):
                mod.__dict__[name] = value
        for fn in SYSTEM_FUNCTIONS:
            if hasattr(lib, fn):
                mod.__dict__[fn] = self._system(fn)
        for fn in DEVICE_FUNCTIONS:
            if hasattr(lib, fn):
                mod.__dict__[fn] = self._device(fn)
        for fn in ARG_FUNCTIONS:
            if hasattr(lib, fn):
                mod.__dict__[fn] = self._by_args(fn)
        if hasattr(lib, "nvmlDeviceGetGpuFabricInfo"):
            mod.__dict__["nvmlDeviceGetGpuFabricInfo"] = self.nvmlDeviceGetGpuFabricInfo
        for fn in _METHODS:
            mod.__dict__[fn] = getattr(self, fn)
        if hasattr(lib, "nvmlEventSetWait"):
            for fn in EVENT_FUNCTIONS:
                mod.__dict__[fn] = getattr(self, fn)
        mod.__dict__["nvmlShutdown"] = lib.nvmlShutdown
        return mod

    def _system(self, fn: str) -> Callable[[], Any]:
        def call() -> Any:
            return self._call(self.data, fn, getattr(self.lib, fn))

        call.__name__ = fn
        return call

    def _device(self, fn: str) -> Callable[..., Any]:
        def call(h: Handle, *args: Any) -> Any:
            return self._call(h.data, fn, getattr(self.lib, fn), h.real, *args)

        call.__name__ = fn
        return call

    def _by_args(self, fn: str) -> Callable[..., Any]:
        def call(h: Handle, *args: Any) -> Any:
            where = h.data.setdefault(fn, {})
            return self._call(where, arg_key(args), getattr(self.lib, fn), h.real, *args)

        call.__name__ = fn
        return call

    def nvmlInit(self) -> None:
        try:
            self.lib.nvmlInit()
        except self.lib.NVMLError as exc:
            self.data["nvmlInit"] = {"error": error_name(exc)}
            raise

    def nvmlDeviceGetCount(self) -> int:
        """Return the count; a later call, the XID watcher's, keeps what was recorded."""
        n = int(self.lib.nvmlDeviceGetCount())
        devices = self.data.setdefault("devices", [])
        del devices[n:]
        devices.extend({} for _ in range(n - len(devices)))
        return n

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Handle:
        data = self.data.setdefault("devices", [])
        while len(data) <= i:
            data.append({})
        try:
            real = self.lib.nvmlDeviceGetHandleByIndex(i)
        except self.lib.NVMLError as exc:
            data[i]["error"] = error_name(exc)
            raise
        self._handles[i] = Handle(real, data[i])
        return self._handles[i]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Handle, j: int) -> Handle:
        migs: list[Any] = h.data.setdefault("migDevices", [])
        while len(migs) <= j:
            migs.append(None)
        real = self.lib.nvmlDeviceGetMigDeviceHandleByIndex(h.real, j)
        migs[j] = {}
        return Handle(real, migs[j], h)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: Handle, p: int, *args: Any) -> Any:
        info = self.lib.nvmlDeviceGetGpuInstanceProfileInfo(h.real, p, *args)
        h.data.setdefault("gpuInstanceProfiles", {})[str(p)] = encode(info)
        return info

    def nvmlDeviceGetGpuInstanceById(self, h: Handle, gi: int) -> Handle:
        real = self.lib.nvmlDeviceGetGpuInstanceById(h.real, gi)
        data = h.data.setdefault("gpuInstances", {}).setdefault(str(gi), {})
        return Handle(real, data, h)

    def nvmlGpuInstanceGetInfo(self, gi: Handle) -> Any:
        info = self.lib.nvmlGpuInstanceGetInfo(gi.real)
        gi.data["profileId"] = int(info.profileId)
        return info

    def nvmlGpuInstanceGetComputeInstanceById(self, gi: Handle, ci: int) -> Handle:
        real = self.lib.nvmlGpuInstanceGetComputeInstanceById(gi.real, ci)
        data = gi.data.setdefault("computeInstances", {}).setdefault(str(ci), {})
        return Handle(real, data, gi)

    def nvmlComputeInstanceGetInfo(self, ci: Handle) -> Any:
        info = self.lib.nvmlComputeInstanceGetInfo(ci.real)
        ci.data["profileId"] = int(info.profileId)
        return info

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: Handle, p: int, *args: Any) -> Any:
        info = self.lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi.real, p, *args)
        dev = gi.parent.data if gi.parent is not None else gi.data
        dev.setdefault("computeInstanceProfiles", {})[str(p)] = encode(info)
        return info

    def nvmlDeviceGetGpuFabricInfo(self, h: Handle, ref: Any) -> Any:
        fn = "nvmlDeviceGetGpuFabricInfo"
        try:
            ret = self.lib.nvmlDeviceGetGpuFabricInfo(h.real, ref)
        except self.lib.NVMLError as exc:
            h.data[fn] = {"error": error_name(exc)}
            raise
        h.data[fn] = encode(getattr(ref, "_obj", ref))  # the struct NVML filled in
        return ret

    # -- the event set: passed through, each delivered event recorded (replay.py _Events) --

    def nvmlEventSetCreate(self) -> Any:
        return self.lib.nvmlEventSetCreate()

    def nvmlDeviceGetSupportedEventTypes(self, h: Handle) -> Any:
        return self.lib.nvmlDeviceGetSupportedEventTypes(h.real)

    def nvmlDeviceRegisterEvents(self, h: Handle, kinds: int, es: Any) -> Any:
        return self.lib.nvmlDeviceRegisterEvents(h.real, kinds, es)

    def nvmlEventSetWait(self, es: Any, timeout_ms: int) -> Any:
        data = self.lib.nvmlEventSetWait(es, timeout_ms)
        index = next((i for i, h in self._handles.items() if same(h.real, data.device)), None)
        if index is not None:
            event = {"device": index, "type": int(data.eventType), "data": int(data.eventData)}
            self.data.setdefault("events", []).append(event)
            return types.SimpleNamespace(
                device=self._handles[index],
                eventType=data.eventType,
                eventData=data.eventData,
                gpuInstanceId=getattr(data, "gpuInstanceId", 0xFFFFFFFF),
                computeInstanceId=getattr(data, "computeInstanceId", 0xFFFFFFFF),
            )
        return data

    def nvmlEventSetFree(self, es: Any) -> Any:
        return self.lib.nvmlEventSetFree(es)


def same(a: Any, b: Any) -> bool:
    """Tell whether two device handles are the same GPU: ctypes pointers compare by address."""
    if a is b:
        return True
    try:
        return bool(ctypes.cast(a, ctypes.c_void_p).value == ctypes.cast(b, ctypes.c_void_p).value)
    except (TypeError, ctypes.ArgumentError):
        return bool(a == b)


# pynvml functions that are methods of Recording, always wrapped (the fabric info only
# when the library has it; nvmlShutdown is passed through)
_METHODS = ("nvmlInit", *HANDLE_FUNCTIONS)


def wrap(lib: types.ModuleType) -> Recording:
    return Recording(lib)
