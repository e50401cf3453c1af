"""NVML adapter: the only module that imports ``pynvml``, from nvidia-ml-py, lazily.

- :func:`query` returns :class:`~nfd_gpu.discovery.nvidia.facts.NvidiaFacts`.
- It returns ``None`` when NVML cannot be initialised: library missing, driver not loaded.
  The caller then falls back to procfs.
- Nothing is cached, so a later pass retries ``nvmlInit``. GFD never retries: see its
  issues #71 and #75.

Error policy:

- ``NotSupported`` and ``FunctionNotFound`` mean "absent".
- Any other error on a GPU, such as ``GPU is lost``, is a warning for that GPU only.
  That GPU then keeps its procfs and PCI facts.

MIG profile names follow go-nvlib's ``mig_profile.go``; see docs/nvidia.md "MIG naming":

- ``{G}g.{GB}gb`` or ``{C}c.{G}g.{GB}gb``;
- plus ``+me``, ``+me.all``, ``+gfx`` or ``-me``;
- ``GB = round(ceil(8 * memMiB * 2**20 / total) / 8 * ceil(total / 2**30))``;
- Go rounding: halves away from zero.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import math
import sys
import uuid
from types import ModuleType
from typing import Any

from nfd_gpu.discovery.nvidia import health
from nfd_gpu.discovery.nvidia.facts import GpuFacts, NvidiaFacts
from nfd_gpu.discovery.pciaddr import canonical
from nfd_gpu.model import Partition

# GPU instance profile enum index -> (slices, attribute suffix); pynvml NVML_GPU_INSTANCE_PROFILE_*.
GI_PROFILES: dict[int, tuple[int, str]] = {
    0x0: (1, ""),
    0x1: (2, ""),
    0x2: (3, ""),
    0x3: (4, ""),
    0x4: (7, ""),
    0x5: (8, ""),
    0x6: (6, ""),
    0x7: (1, "+me"),  # 1_SLICE_REV1
    0x8: (2, "+me"),  # 2_SLICE_REV1
    0x9: (1, ""),  # 1_SLICE_REV2 (double memory)
    0xA: (1, "+gfx"),
    0xB: (2, "+gfx"),
    0xC: (4, "+gfx"),
    0xD: (1, "-me"),
    0xE: (2, "-me"),
    0xF: (1, "+me.all"),
    0x10: (2, "+me.all"),
}
# Compute instance profile enum index -> slices; NVML_COMPUTE_INSTANCE_PROFILE_*.
CI_PROFILES: dict[int, int] = {0x0: 1, 0x1: 2, 0x2: 3, 0x3: 4, 0x4: 7, 0x5: 8, 0x6: 6, 0x7: 1}
CI_ENGINE_SHARED = 0

_VIRT = {0: "none", 1: "passthrough", 2: "vgpu-guest", 3: "vgpu-host", 4: "vgpu-host"}
_ABSENT = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")


def mig_memory_gb(memory_mib: int, total_bytes: int) -> int:
    """Return go-nvlib's MIG memory size in GB for a profile name.

    Go's ``math.Round`` rounds half away from zero; Python's ``round`` rounds to even.
    The H200's 4/8 of 141 GB is 70.5 -> ``3g.71gb``, as NVML names it.
    See tests/data/captures/h200-vm.
    """
    eighths = math.ceil(8 * memory_mib * 2**20 / total_bytes)
    return round_half_away(eighths * math.ceil(total_bytes / 2**30), 8)


def round_half_away(num: int, den: int) -> int:
    """Return ``num / den`` rounded to the nearest integer, halves away from zero, exactly."""
    q, r = divmod(abs(num), den)
    q += 2 * r >= den
    return q if num >= 0 else -q


def profile_name(g: int, c: int, gb: int, suffix: str) -> str:
    base = f"{g}g.{gb}gb" if c == g else f"{c}c.{g}g.{gb}gb"
    return base + suffix


# what nvidia-ml-py's nvmlInit opens on Linux (CDLL of this name, nothing else)
NVML_SONAME = "libnvidia-ml.so.1"


def library_error() -> str | None:
    """Why the NVML shared library does not open (the loader's words); None when it does."""
    try:
        ctypes.CDLL(NVML_SONAME)
    except OSError as e:
        return " ".join(str(e).split()) or f"{NVML_SONAME} does not open"
    return None


def unusable() -> str | None:
    """Why ``nvmlInit`` cannot succeed, told without importing ``pynvml``; None if it may.

    - Without the NVML shared library ``nvmlInit`` fails, so ``pynvml`` is not imported
      to find out: it is 5,000 lines, which import ctypes.util, shutil, tempfile, ...
      (~30 ms CPU on every node without NVIDIA's driver).
    - A ``pynvml`` imported already (a test's fake, or the real one) is asked as it is.
    """
    return None if "pynvml" in sys.modules else library_error()


def load_library() -> ModuleType | None:
    """Run ``import pynvml``, or take the module a test put in ``sys.modules``; None if missing."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _absent(exc: BaseException) -> bool:
    return any(c.__name__ in _ABSENT for c in type(exc).__mro__)


class BadBusId(ValueError):
    """NVML gave a GPU no PCI address that can be matched to a function."""


def _str(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class _Gpu:
    """Calls on one device handle: absent -> None, other NVML errors propagate."""

    def __init__(self, lib: ModuleType) -> None:
        self.lib = lib

    def opt(self, fn: str, *args: Any) -> Any:
        f = getattr(self.lib, fn, None)
        if f is None:
            return None
        try:
            return f(*args)
        except self.lib.NVMLError as exc:
            if _absent(exc):
                return None
            raise


class InitFailed(Exception):
    """``nvmlInit`` failed although libnvidia-ml is there; the message says why."""


# pynvml's error classes that mean "no libnvidia-ml here" (no driver userspace in this
# container), as opposed to a library that is there and fails to start
_NO_LIBRARY = ("NVMLError_LibraryNotFound", "NVMLError_FunctionNotFound")


def init(lib: ModuleType) -> str | None:
    """Call ``nvmlInit``; return None when it succeeded.

    - When the library is missing, return why not, in one line.
    - Raise :class:`InitFailed` when it is there and fails.
      Causes: driver not loaded, or a library and kernel module of different versions.
    """
    try:
        lib.nvmlInit()
    except Exception as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        nvml_error = isinstance(exc, getattr(lib, "NVMLError", ()))
        if nvml_error and not any(c.__name__ in _NO_LIBRARY for c in type(exc).__mro__):
            raise InitFailed(why) from None
        return why
    return None


def query(lib: ModuleType | None = None) -> NvidiaFacts | None:
    """Return everything NVML says: init, collect, shutdown; None without the library.

    Raises :class:`InitFailed` when ``nvmlInit`` fails with the library there.
    """
    if lib is None:
        if unusable() is not None:
            return None  # nvmlInit could not succeed
        lib = load_library()
        if lib is None:
            return None
    if init(lib) is not None:
        return None
    try:
        return collect(lib)
    except lib.NVMLError as exc:
        return NvidiaFacts(source="nvml", warnings=(f"nvml: {exc}",))
    finally:
        with contextlib.suppress(Exception):  # nothing useful to do on a failing shutdown
            lib.nvmlShutdown()


def collect(lib: ModuleType) -> NvidiaFacts:
    """Return everything an initialised NVML says.

    - A failing system-level call, count or driver, raises ``lib.NVMLError``.
    - A failing GPU is a warning and keeps its procfs facts.
    """
    call = _Gpu(lib)
    warnings: list[str] = []
    driver = call.opt("nvmlSystemGetDriverVersion")
    cuda_int = call.opt("nvmlSystemGetCudaDriverVersion")
    count = int(lib.nvmlDeviceGetCount())
    cuda = None
    if isinstance(cuda_int, int) and cuda_int > 0:
        cuda = f"{cuda_int // 1000}.{cuda_int % 1000 // 10}"
    gpus: list[GpuFacts] = []
    parts: list[Partition] = []
    for i in range(count):
        try:
            g, p = _device(lib, call, i)
        except (lib.NVMLError, BadBusId) as exc:
            warnings.append(f"nvml: GPU {i}: {exc}; using procfs/PCI facts for it")
            continue
        gpus.append(g)
        parts.extend(p)
    return NvidiaFacts(
        source="nvml",
        driver_version=_str(driver) if driver else None,
        cuda_version=cuda,
        gpus=tuple(gpus),
        partitions=tuple(parts),
        warnings=tuple(warnings),
    )


def _device(lib: ModuleType, call: _Gpu, i: int) -> tuple[GpuFacts, list[Partition]]:
    h = lib.nvmlDeviceGetHandleByIndex(i)
    pci = lib.nvmlDeviceGetPciInfo(h)
    # busId has the whole 32-bit domain; busIdLegacy (four domain digits) only when it is absent
    raw = _str(getattr(pci, "busId", b"") or getattr(pci, "busIdLegacy", b""))
    addr = canonical(raw)
    if addr is None:
        raise BadBusId(f"PCI bus id {raw[:40]!r} is not an address")
    name = call.opt("nvmlDeviceGetName", h)
    uuid = call.opt("nvmlDeviceGetUUID", h)
    minor = call.opt("nvmlDeviceGetMinorNumber", h)
    mem = call.opt("nvmlDeviceGetMemoryInfo", h)
    total = int(mem.total) if mem is not None else None
    cc = call.opt("nvmlDeviceGetCudaComputeCapability", h)
    mig = call.opt("nvmlDeviceGetMigMode", h)
    mig_cur = mig is not None and int(mig[0]) == lib.NVML_DEVICE_MIG_ENABLE
    max_mig = call.opt("nvmlDeviceGetMaxMigDeviceCount", h) if mig is not None else None
    virt = call.opt("nvmlDeviceGetVirtualizationMode", h)
    sms = None
    attrs = call.opt("nvmlDeviceGetAttributes", h) if not mig_cur else None
    if attrs is not None:
        sms = int(attrs.multiprocessorCount) or None
    fabric = _clique(lib, h)
    parts: list[Partition] = []
    if mig_cur and max_mig and total and total > 0:
        parts = _mig_devices(lib, call, h, addr, min(int(max_mig), MAX_MIG_DEVICES), total)
    signals, faults = health.read(lib, h)
    facts = GpuFacts(
        address=addr,
        product=_str(name) if name else None,
        uuid=_str(uuid) if uuid else None,
        minor=int(minor) if minor is not None else None,
        memory_mib=total // (1024 * 1024) if total else None,
        compute_major=int(cc[0]) if cc else None,
        compute_minor=int(cc[1]) if cc else None,
        mig_capable=mig is not None,
        mig_enabled=mig_cur,
        multiprocessors=sms,
        virtualization=_VIRT.get(int(virt)) if virt is not None else None,
        clique=fabric,
        health_signals=signals,
        health_reasons=faults,
    )
    return facts, parts


# MIG devices looked up per GPU at most (7 on every MIG GPU so far): a bound against a
# damaged recording or library answer, never a loop over an arbitrary count.
MAX_MIG_DEVICES = 64
FABRIC_STATE_COMPLETED = 3  # NVML_GPU_FABRIC_STATE_COMPLETED


def _clique(lib: ModuleType, h: Any) -> str | None:
    """Return ``<clusterUUID>.<cliqueId>`` when the GPU is attached to an NVLink fabric, else None.

    - The call: ``nvmlDeviceGetGpuFabricInfo(handle, byref(c_nvmlGpuFabricInfo_t()))``.
    - Every error means "no clique".
      The call is absent before Hopper drivers and deprecated after CUDA 13.
    """
    fn = getattr(lib, "nvmlDeviceGetGpuFabricInfo", None)
    cls = getattr(lib, "c_nvmlGpuFabricInfo_t", None)
    if fn is None or cls is None:
        return None
    info = cls()
    try:
        fn(h, ctypes.byref(info))
    except lib.NVMLError:
        return None
    if int(info.state) != FABRIC_STATE_COMPLETED or int(info.status) != 0:
        return None
    raw = bytes(bytearray(info.clusterUuid))
    # 16 bytes (NVML_GPU_FABRIC_UUID_LEN); some nvidia-ml-py versions declare a longer
    # array: the UUID is its first 16 bytes, the rest must be zero.
    if len(raw) < 16 or any(raw[16:]) or not any(raw[:16]):
        return None
    raw = raw[:16]
    return f"{uuid.UUID(bytes=raw)}.{int(info.cliqueId)}"


def _mig_devices(
    lib: ModuleType, call: _Gpu, h: Any, addr: str, max_mig: int, total: int
) -> list[Partition]:
    gi_ids = _profile_ids(lib, h)
    out: list[Partition] = []
    for j in range(max_mig):
        try:
            m = lib.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
        except lib.NVMLError as exc:
            if type(exc).__name__ in ("NVMLError_NotFound", "NVMLError_InvalidArgument"):
                continue
            raise
        a = lib.nvmlDeviceGetAttributes(m)
        gi_id = lib.nvmlDeviceGetGpuInstanceId(m)
        ci_id = lib.nvmlDeviceGetComputeInstanceId(m)
        gi = lib.nvmlDeviceGetGpuInstanceById(h, gi_id)
        gi_info = lib.nvmlGpuInstanceGetInfo(gi)
        ci = lib.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id)
        ci_info = lib.nvmlComputeInstanceGetInfo(ci)
        gi_enum = gi_ids.get(int(gi_info.profileId))
        if gi_enum is None:
            raise lib.NVMLError(lib.NVML_ERROR_NOT_FOUND)
        g, suffix = GI_PROFILES[gi_enum]
        c = g
        for ci_enum, slices in CI_PROFILES.items():
            try:
                info = lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, ci_enum, CI_ENGINE_SHARED
                )
            except lib.NVMLError as exc:
                if _absent(exc) or type(exc).__name__ == "NVMLError_InvalidArgument":
                    continue
                raise
            if int(info.id) == int(ci_info.profileId):
                c = slices
                break
        gb = mig_memory_gb(int(a.memorySizeMB), total)
        uuid = call.opt("nvmlDeviceGetUUID", m)
        out.append(
            Partition(
                parent=addr,
                kind="mig",
                profile=profile_name(g, c, gb, suffix),
                index=len(out),
                memory_mib=int(a.memorySizeMB),
                compute_units=int(a.multiprocessorCount),
                uuid=_str(uuid) if uuid else None,
                slices_gi=_attr(a, "gpuInstanceSliceCount"),
                slices_ci=_attr(a, "computeInstanceSliceCount"),
                engines_copy=_attr(a, "sharedCopyEngineCount"),
                engines_decoder=_attr(a, "sharedDecoderCount"),
                engines_encoder=_attr(a, "sharedEncoderCount"),
                engines_jpeg=_attr(a, "sharedJpegCount"),
                engines_ofa=_attr(a, "sharedOfaCount"),
            )
        )
    return out


def _attr(a: Any, name: str) -> int | None:
    v = getattr(a, name, None)
    return int(v) if v is not None else None


def _profile_ids(lib: ModuleType, h: Any) -> dict[int, int]:
    """NVML profile id -> enum index, for the profiles this GPU supports."""
    out: dict[int, int] = {}
    for enum in GI_PROFILES:
        try:
            info = lib.nvmlDeviceGetGpuInstanceProfileInfo(h, enum)
        except lib.NVMLError as exc:
            if _absent(exc) or type(exc).__name__ == "NVMLError_InvalidArgument":
                continue
            raise
        out.setdefault(int(info.id), enum)
    return out
