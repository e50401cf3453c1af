"""What CUDA's driver library answers about the GPUs: the calls GFD's ``tegra`` strategy makes.

GFD's code: NVIDIA/k8s-device-plugin ``internal/cuda``, ``internal/resource/cuda-lib.go``
and ``cuda-device.go``.
The calls: ``cuInit``, ``cuDriverGetVersion``, ``cuDeviceGetCount``, ``cuDeviceGet``,
``cuDeviceGetName``, ``cuDeviceTotalMem`` and ``cuDeviceGetAttribute``.
The attributes asked are compute capability major 75 and minor 76.

Where the answers come from, in order:

* ``<root>/cuda.json`` when it exists: a recording, replayed.
  The fixtures of Jetsons come from public ``deviceQuery`` listings.
  The GFD judge's fake ``libcuda.so.1`` answers GFD from the same file.
  Shape: ``{"cuInit": 0, "cuDriverGetVersion": 12090, "devices":
  [{"cuDeviceGetName": "Orin", "cuDeviceTotalMem": 57454317568, "cuDeviceGetAttribute":
  {"75": 8, "76": 7}}]}``.
  An answer ``{"error": N}`` is that call's ``CUresult`` N.
* Else, on the host's own root ``/``, the real ``libcuda.so.1`` through ctypes, when it loads.
* Else nothing: None.
"""

from __future__ import annotations

import ctypes
from typing import Any

from nfd_gpu.host import HostRoot
from nfd_gpu.record import Record, record

CUDA_RECORDING = "cuda.json"
CC_MAJOR, CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_NAME_LEN = 96  # GFD's buffer (internal/cuda/cuda.go DeviceGetName)


@record(slots=False)
class CudaDevice(Record):
    name: str | None = None
    total_mem: int | None = None  # bytes
    compute_major: int | None = None
    compute_minor: int | None = None


@record(slots=False)
class CudaFacts(Record):
    driver_version: int | None  # cuDriverGetVersion: 1000 * major + 10 * minor
    devices: tuple[CudaDevice, ...]

    @property
    def version(self) -> str | None:
        """Return ``major.minor`` as GFD writes it: ``version / 1000``, ``version % 100 / 10``."""
        v = self.driver_version
        return None if v is None else f"{v // 1000}.{v % 100 // 10}"


class CudaError(Exception):
    """A CUDA call answered an error: its ``CUresult``."""


def query(host: HostRoot) -> CudaFacts | None:
    """Return CUDA's answers, as the module docstring says; None where CUDA does not answer."""
    if host.exists(CUDA_RECORDING):
        return _replayed(host)
    if host.root != "/":
        return None
    try:
        return _ask(_Library(ctypes.CDLL("libcuda.so.1")))
    except (OSError, AttributeError, CudaError):
        return None


def _replayed(host: HostRoot) -> CudaFacts | None:
    import json  # lazy: only a recorded host replays; `scan` imports no json (tests/cli)

    text = host.read_text(CUDA_RECORDING, optional=False)
    try:
        rec = json.loads(text or "")
        if not isinstance(rec, dict) or not isinstance(rec.get("devices", []), list):
            raise ValueError("expected an object with a devices list")
        return _ask(_Recording(rec))
    except CudaError:
        return None
    except (ValueError, TypeError) as exc:
        host.warn(f"{CUDA_RECORDING}: not a CUDA recording ({exc}); CUDA not asked")
        return None


def _ask(lib: _Recording | _Library) -> CudaFacts:
    """Make the calls in GFD's order: init, count, each device, the driver version."""
    lib.init()
    devices = []
    for i in range(lib.count()):
        major, minor = lib.attribute(i, CC_MAJOR), lib.attribute(i, CC_MINOR)
        devices.append(CudaDevice(lib.name(i), lib.total_mem(i), major, minor))
    return CudaFacts(lib.driver_version(), tuple(devices))


class _Recording:
    """A ``cuda.json``: each call's recorded answer."""

    def __init__(self, rec: dict[str, Any]) -> None:
        self.rec = rec

    @staticmethod
    def _value(v: Any) -> Any:
        if isinstance(v, dict) and "error" in v:
            raise CudaError(v["error"])
        return v

    def _device(self, i: int, call: str) -> Any:
        return self._value(self.rec["devices"][i].get(call, {"error": 801}))

    def init(self) -> None:
        if self._value(self.rec.get("cuInit", 0)) != 0:
            raise CudaError("cuInit")

    def count(self) -> int:
        return len(self.rec.get("devices", []))

    def name(self, i: int) -> str | None:
        v = self._device(i, "cuDeviceGetName")
        return str(v)[: _NAME_LEN - 1]

    def total_mem(self, i: int) -> int | None:
        return int(self._device(i, "cuDeviceTotalMem"))

    def attribute(self, i: int, attr: int) -> int:
        values = self._device(i, "cuDeviceGetAttribute")
        return int(self._value(values[str(attr)]))

    def driver_version(self) -> int | None:
        return int(self._value(self.rec["cuDriverGetVersion"]))


class _Library:
    """The real ``libcuda.so.1``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def _call(self, fn: str, *args: Any) -> None:
        r = getattr(self.lib, fn)(*args)
        if r != 0:
            raise CudaError(f"{fn}: {r}")

    def _device(self, i: int) -> ctypes.c_int:
        dev = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(dev), i)
        return dev

    def init(self) -> None:
        self._call("cuInit", 0)

    def count(self) -> int:
        n = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def name(self, i: int) -> str | None:
        buf = ctypes.create_string_buffer(_NAME_LEN)
        self._call("cuDeviceGetName", buf, _NAME_LEN, self._device(i))
        return buf.value.decode("utf-8", "replace")

    def total_mem(self, i: int) -> int | None:
        size = ctypes.c_size_t()
        self._call("cuDeviceTotalMem_v2", ctypes.byref(size), self._device(i))
        return size.value

    def attribute(self, i: int, attr: int) -> int:
        v = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(v), attr, self._device(i))
        return v.value

    def driver_version(self) -> int | None:
        v = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(v))
        return v.value
