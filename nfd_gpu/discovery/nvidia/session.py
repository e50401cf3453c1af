"""Which NVML a scan asks, by ``--nvml auto|on|off``, and what the agent keeps between passes.

The root says where files are read, not whether a vendor library may be asked.

* ``auto``, the default, tries in order:
  ``<root>/nvml.json`` when it exists, a recording to replay;
  the real ``pynvml`` when it imports and ``nvmlInit`` succeeds;
  else procfs and sysfs facts.
  The recording is read through :class:`~nfd_gpu.host.HostRoot`, bounded and validated.
  A bad one is a warning, and procfs facts are used.
* ``on``: the same order. But on a node with NVIDIA GPUs, NVML not answering is an error:
  :class:`NvmlRequired`. ``scan`` exits 1. The agent does not publish that pass and keeps
  its last publication. The exception: the agent still holds the last NVML facts of the
  same GPUs, see below.
* ``off``: never; procfs and sysfs facts only.

A session with ``keep=True`` is the agent's:

- It keeps the library initialised across passes: ``nvmlInit`` once.
  After an NVML error it shuts down and initialises again on the next pass.
- It keeps the last NVML facts per GPU UUID.
- While NVML is unavailable, those facts are used again if procfs shows the same GPUs,
  the same driver version and the same MIG instances. Same GPUs means address and UUID.
- They are marked ``stale``, with a warning. So labels do not flap when NVML comes and goes.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

from nfd_gpu.discovery.nvidia.facts import NVML_RECORDING, NvidiaFacts
from nfd_gpu.host import HostRoot
from nfd_gpu.record import Record, record, replace

NVML_MODES = ("auto", "on", "off")


class NvmlRequired(Exception):
    """``--nvml on`` and NVML could not be used; the message is one line."""


@record(slots=False)
class _Cached(Record):
    key: tuple[Any, ...]
    facts: NvidiaFacts


def identity(procfs: NvidiaFacts) -> tuple[Any, ...] | None:
    """Return what must stay the same for cached NVML facts to still describe the node."""
    if not procfs.gpus or any(g.uuid is None for g in procfs.gpus) or not procfs.driver_version:
        return None
    gpus = tuple(sorted((g.address, g.uuid or "") for g in procfs.gpus))
    parts = tuple(sorted(p.parent for p in procfs.partitions))
    return (procfs.driver_version, gpus, parts)


class NvmlSession:
    """NVML for one scan, ``keep=False``, or for every pass of the agent, ``keep=True``."""

    def __init__(self, mode: str = "auto", *, lib: ModuleType | None = None, keep: bool = False):
        if mode not in NVML_MODES:
            raise ValueError(f"nvml mode must be one of {', '.join(NVML_MODES)}, got {mode!r}")
        self.mode = mode
        self.keep = keep
        self._explicit = lib
        self._lib: ModuleType | None = None  # initialised and kept (keep=True)
        self._cache: _Cached | None = None
        self.status = "none"  # nvml | replay | stale | procfs | off | none (no NVIDIA GPU)
        self.reason: str | None = None  # why NVML was not used, when it was not
        self.init_error: str | None = None  # nvmlInit's error, the library being present

    def close(self) -> None:
        """Shut the kept library down, at agent exit."""
        if self._lib is not None:
            with contextlib.suppress(Exception):
                self._lib.nvmlShutdown()
            self._lib = None

    def query(self, host: HostRoot, procfs: NvidiaFacts) -> NvidiaFacts | None:
        """Return NVML facts for this pass, or None: procfs facts only. Warnings go to ``host``."""
        from nfd_gpu.discovery.nvidia import nvml  # lazy: the NVML adapter (ctypes) only when asked

        self.reason = self.init_error = None
        if self.mode == "off":
            self.status = "off"
            return None
        lib = self._explicit
        replay = False
        # lexists: a recording that is a dangling link (e.g. to /dev/zero, re-rooted inside
        # the root) is still tried, so its warning names the file
        if lib is None and host.lexists(NVML_RECORDING):
            lib = self._load_recording(host)
            if lib is None:
                return self._unavailable(host, procfs, self.reason or "bad recording")
            replay = True
        if replay or not self.keep:
            try:
                facts = nvml.query(lib) if lib is not None else nvml.query()
            except nvml.InitFailed as exc:
                self.init_error = str(exc)
                return self._unavailable(host, procfs, f"nvmlInit: {exc}")
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
                if not replay:
                    raise
                # validated, so not expected: still a warning, never a crash
                host.warn(f"/{NVML_RECORDING}: recording not replayable ({exc!r})")
                return self._unavailable(host, procfs, "recording not replayable")
            if facts is None:
                return self._unavailable(host, procfs, "nvmlInit failed or pynvml missing")
            return self._answered(host, facts, "replay" if replay else "nvml", procfs)
        return self._kept_query(host, procfs)

    # -- the agent's kept library -----------------------------------------------------------

    def _kept_query(self, host: HostRoot, procfs: NvidiaFacts) -> NvidiaFacts | None:
        from nfd_gpu.discovery.nvidia import nvml  # lazy: the NVML adapter (ctypes) only when asked

        if self._lib is None:
            missing = None if self._explicit else nvml.unusable()
            if missing is not None:
                return self._unavailable(host, procfs, f"nvmlInit: {missing}")
            lib = self._explicit or nvml.load_library()
            if lib is None:
                return self._unavailable(host, procfs, "pynvml cannot be imported")
            try:
                why = nvml.init(lib)
            except nvml.InitFailed as exc:
                self.init_error = why = str(exc)
            if why is not None:
                return self._unavailable(host, procfs, f"nvmlInit: {why}")
            self._lib = lib
        try:
            facts = nvml.collect(self._lib)
        except self._lib.NVMLError as exc:
            self.close()  # initialise again on the next pass
            return self._unavailable(host, procfs, f"NVML error: {exc}")
        return self._answered(host, facts, "nvml", procfs)

    # -- outcomes ---------------------------------------------------------------------------

    def _answered(
        self, host: HostRoot, facts: NvidiaFacts, status: str, procfs: NvidiaFacts
    ) -> NvidiaFacts:
        self.status = status
        for w in facts.warnings:
            host.warn(w)
        if self.keep and not facts.warnings:
            key = identity(procfs)
            self._cache = _Cached(key, facts) if key is not None else None
        return facts

    def _unavailable(self, host: HostRoot, procfs: NvidiaFacts, why: str) -> NvidiaFacts | None:
        self.reason = why
        cached = self._cache
        if cached is not None and cached.key == identity(procfs):
            self.status = "stale"
            host.warn(
                f"nvml: unavailable ({why}); keeping the last NVML facts of "
                f"{len(cached.facts.gpus)} GPU(s) (same GPUs and driver)"
            )
            gpus = tuple(replace(g, source="nvml-stale") for g in cached.facts.gpus)
            return replace(cached.facts, gpus=gpus, warnings=())
        self._cache = None
        self.status = "procfs"
        if self.mode == "on":
            raise NvmlRequired(f"NVML required (--nvml on) but not usable: {why}")
        return None

    def _load_recording(self, host: HostRoot) -> ModuleType | None:
        from nfd_gpu.discovery.nvidia import replay  # lazy: only for a recording

        data = host.read_bytes(NVML_RECORDING, limit=replay.MAX_RECORDING)
        if data is None:
            self.reason = "recording unreadable"
            return None
        if len(data) >= replay.MAX_RECORDING:
            self.reason = f"recording larger than {replay.MAX_RECORDING} bytes"
            host.warn(f"/{NVML_RECORDING}: {self.reason}; using procfs facts")
            return None
        try:
            return replay.loads(data)
        except replay.RecordingError as exc:
            self.reason = f"bad recording: {exc}"
            host.warn(f"/{NVML_RECORDING}: bad NVML recording ({exc}); using procfs facts")
            return None
