"""GPU health: the faults discovery read, judged against the thresholds, held against flapping.

- Discovery records what it read on each GPU in :class:`~nfd_gpu.model.Health`: the signals
  read, the faults found with their counts.
- :func:`judge` gives every fault its severity, ``failed`` or ``degraded``, or drops it when
  under its threshold; it gives the GPU its state.
- :class:`HealthTracker`, the agent's, kept across passes, holds a state until its cause has
  been clear for ``hold_passes`` passes.

docs/health.md lists every reason, its source and default; the defaults here are the ones
documented there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nfd_gpu.health.signals import BY_REASON, DEGRADED, FAILED, NO_DRIVER, SIGNALS
from nfd_gpu.model import HEALTH_STATES, Gpu, Health, HealthReason, Snapshot
from nfd_gpu.record import Record, record, replace

# XIDs the NVIDIA device plugin does not treat as a GPU fault (application errors: 13
# graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing, 45
# preemptive cleanup, 68 video processor exception, 109 context switch timeout):
# k8s-device-plugin internal/rm/health.go, its skipped XIDs. Every other XID fails the GPU,
# as there; NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors) marks e.g. 48 (double
# bit ECC), 79 (fallen off the bus), 94/95 (contained/uncontained ECC), 119/120 (GSP) as
# needing a GPU reset or node reboot.
DEFAULT_NONFATAL_XIDS = frozenset({13, 31, 43, 45, 68, 109})

# reason -> severity when its count reaches the threshold: made of the signal table
SEVERITY: dict[str, str] = {s.reason: s.severity for s in SIGNALS}
# signals of the bus, not of the GPU: they alone never make a GPU ``ok``
BUS_SIGNALS = frozenset(s.signal for s in SIGNALS if s.source in ("PCI", "the agent"))
# the state of each severity, worst first (a GPU with none: ``ok`` or ``unknown``)
_WORST_FIRST = (FAILED, DEGRADED, NO_DRIVER)


@record(slots=False)
class HealthOptions(Record):
    """The thresholds, settings ``health_*`` in docs/health.md; 0 turns a threshold off."""

    hold_passes: int = 3  # clear passes before a GPU's state improves
    nonfatal_xids: frozenset[int] = DEFAULT_NONFATAL_XIDS
    uncorrectable: int = 1  # uncorrectable ECC / RAS ue errors that fail a GPU
    correctable: int = 0  # correctable errors (RAS ce, AER correctable) that degrade it

    @classmethod
    def from_settings(
        cls, hold: float, xids: Iterable[str], uncorrectable: float, correctable: float
    ) -> HealthOptions:
        """From the settings' values; a one-line ValueError for a bad one."""
        codes: set[int] = set()
        for x in xids:
            if not x.strip().isdigit():
                raise ValueError(f"health_nonfatal_xids: {x!r} is not an XID number")
            codes.add(int(x))
        for name, v in (("hold_passes", hold), ("uncorrectable", uncorrectable)):
            if v < 0 or v != int(v):
                raise ValueError(f"health_{name}: expected a whole number >= 0, got {v:g}")
        if correctable < 0 or correctable != int(correctable):
            raise ValueError(
                f"health_correctable: expected a whole number >= 0, got {correctable:g}"
            )
        return cls(int(hold), frozenset(codes), int(uncorrectable), int(correctable))


def _threshold(reason: str, opts: HealthOptions) -> int:
    setting = BY_REASON[reason].threshold
    if setting == "health_uncorrectable":
        return opts.uncorrectable
    if setting == "health_correctable":
        return opts.correctable
    return 1


def severity(r: HealthReason, opts: HealthOptions) -> str | None:
    """The severity of a fault read; None when it does not count.

    - It does not count under its threshold, or as a non-fatal XID.
    - A reason the signal table lacks is ``failed``: never dropped.
    """
    sev = SEVERITY.get(r.reason)
    if sev is None:
        return FAILED
    if r.reason == "xid":
        return None if r.value in opts.nonfatal_xids else sev
    limit = _threshold(r.reason, opts)
    return sev if limit > 0 and r.value >= limit else None


def rank(state: str) -> int:
    return HEALTH_STATES.index(state) if state in HEALTH_STATES else 0


def judge(h: Health, opts: HealthOptions) -> Health:
    """The record with each counting fault's severity, the others dropped, and its state."""
    reasons: list[HealthReason] = []
    for r in h.reasons:
        sev = severity(r, opts)
        if sev is not None:
            reasons.append(replace(r, severity=sev))
    found = {r.severity for r in reasons}
    state = next((s for s in _WORST_FIRST if s in found), None)
    if state is None:  # ok only when the GPU itself (not only its bus) was read
        state = "ok" if set(h.signals) - BUS_SIGNALS else "unknown"
    return Health(state, tuple(reasons), h.signals)


def judge_gpus(snap: Snapshot, opts: HealthOptions) -> Snapshot:
    gpus = tuple(replace(g, health=judge(g.health, opts)) for g in snap.gpus)
    return replace(snap, gpus=gpus)


@dataclass
class _Held:
    """What the tracker holds of one GPU between passes."""

    health: Health  # the state shown and the faults behind it
    clear: int = 0  # passes in a row the GPU read better than that state
    relapses: int = 0  # times in a row it got worse again soon after it improved
    since: int = 0  # passes since the state last changed
    improved: bool = False  # that change was an improvement (a worse one soon: a relapse)


# A fault that recurs is held down: each relapse (worse again within the hold after it
# improved) doubles the passes it must read clear, up to MAX_BACKOFF times the hold; a
# GPU that stays ``ok`` for CALM of those holds in a row starts again from one hold.
MAX_BACKOFF = 8
CALM = 4


class HealthTracker:
    """The agent's health across passes, keyed by PCI address.

    - A state that gets worse shows at once.
    - One that gets better shows only after ``hold_passes`` passes in a row read at least that
      good, so a fault that toggles keeps its state.
    - A pass that could read nothing, ``unknown``, neither clears nor changes a held state.
    - A GPU of the agent's first complete pass that is gone is ``lost``, ``Snapshot.lost_gpus``,
      until it comes back or the node reboots.
    - That pass holds what the node had at start, with the boot set an earlier run of the agent
      left: :meth:`carry`.
    - A GPU added later and removed again is not lost.
    """

    def __init__(self, opts: HealthOptions | None = None) -> None:
        self.opts = opts or HealthOptions()
        self.watching = False  # an XID watcher runs: its signal is read on NVIDIA GPUs
        self._held: dict[str, _Held] = {}
        self._xids: dict[str, set[int]] = {}  # XIDs seen per GPU address, kept
        self._boot: set[str] | None = None  # the GPU addresses of the agent's first complete pass
        self._carried_boot: set[str] = set()  # the boot set an earlier run left (carry_boot)

    def add_xid(self, address: str, xid: int) -> None:
        """Record an XID event of the GPU at ``address``.

        It is a fault of the GPU until the GPU is re-initialised, :meth:`forget`, or the node
        reboots.
        """
        self._xids.setdefault(address, set()).add(xid)

    def carry(self, address: str, reasons: tuple[HealthReason, ...], xids: tuple[int, ...]) -> None:
        """Hold what an earlier run of the agent held on the GPU at ``address``.

        - That is ``failed``, with its faults.
        - It is held as if this run had seen it.
        - Its XIDs are kept; its other faults are held until ``hold_passes`` passes read clear.
        """
        shown = reasons + tuple(HealthReason("xid", "nvml-events", x, FAILED) for x in xids)
        self._held[address] = _Held(Health(FAILED, shown))
        if xids:
            self._xids.setdefault(address, set()).update(xids)

    def carry_boot(self, addresses: Iterable[str]) -> None:
        """Take the GPUs an earlier run of the agent counted at boot, same boot of the node.

        One of them that is gone now is lost, not forgotten.
        """
        self._carried_boot.update(addresses)

    def forget(self, address: str) -> None:
        """Drop what was held on the GPU at ``address``: it was re-initialised.

        That is, removed and added again, or its driver re-bound.
        """
        self._held.pop(address, None)
        self._xids.pop(address, None)

    def failed(self) -> dict[str, tuple[tuple[HealthReason, ...], tuple[int, ...]]]:
        """The GPUs held ``failed`` or with XIDs kept, for the next run of the agent.

        Each maps address -> the faults shown other than XIDs, and the XIDs kept.
        """
        out: dict[str, tuple[tuple[HealthReason, ...], tuple[int, ...]]] = {}
        for address in sorted(set(self._held) | set(self._xids)):
            held = self._held.get(address)
            kept = self._xids.get(address, set())
            xids = tuple(sorted(x for x in kept if x not in self.opts.nonfatal_xids))
            if held is not None and held.health.state == FAILED:
                reasons = tuple(r for r in held.health.reasons if r.reason != "xid")
            else:
                reasons = ()
            if reasons or xids:
                out[address] = (reasons, xids)
        return out

    @property
    def boot(self) -> frozenset[str]:
        """The boot set; empty until a complete pass."""
        return frozenset(self._boot or ())

    def apply(self, snap: Snapshot, *, complete: bool = True) -> Snapshot:
        """The snapshot with the XIDs seen, judged by :func:`judge`, with the held states.

        ``complete``: the pass listed the bus fully; only such a pass sets the boot set.
        """
        judged = judge_gpus(self._with_xids(snap), self.opts)
        gpus = tuple(self._one(g) for g in judged.gpus)
        # a GPU that is gone keeps its held state and XIDs (a pass that missed it, e.g. an
        # incomplete listing, must not reset them); the memory is one entry per address seen
        present = {g.address for g in gpus}
        if self._boot is None:
            if not complete:
                return replace(judged, gpus=gpus)
            self._boot = present | self._carried_boot
        lost = tuple(sorted(self._boot - present))
        return replace(judged, gpus=gpus, lost_gpus=lost)

    def _with_xids(self, snap: Snapshot) -> Snapshot:
        """The XIDs seen, kept when the watcher stops; the ``nvml.xid`` signal while it watches."""
        signals = ("nvml.xid",) if self.watching else ()
        gpus = []
        for g in snap.gpus:
            if g.vendor == "nvidia":
                xids = sorted(self._xids.get(g.address, ()))
                faults = tuple(HealthReason("xid", "nvml-events", x) for x in xids)
                g = replace(g, health=g.health.read(signals, faults))
            gpus.append(g)
        return replace(snap, gpus=tuple(gpus))

    def hold(self, address: str) -> int:
        """The clear passes the GPU at ``address`` needs before its state improves.

        It is the hold, doubled for each recent relapse, up to MAX_BACKOFF holds.
        """
        held = self._held.get(address)
        relapses = held.relapses if held is not None else 0
        factor: int = min(1 << relapses, MAX_BACKOFF)
        return self.opts.hold_passes * factor

    def _one(self, g: Gpu) -> Gpu:
        now = g.health
        held = self._held.get(g.address)
        if held is None:
            self._held[g.address] = _Held(now)
            return g
        held.since += 1
        if now.state == "unknown":
            return replace(g, health=held.health)
        if rank(now.state) > rank(held.health.state):  # worse: at once
            hold = self.hold(g.address)
            relapse = held.improved and held.since <= hold
            relapses = min(held.relapses + 1, MAX_BACKOFF) if relapse else held.relapses
            self._held[g.address] = _Held(now, relapses=relapses)
            return g
        if rank(now.state) == rank(held.health.state):
            # healthy for CALM holds in a row: the backoff starts again from one hold
            calm = now.state == "ok" and held.since > CALM * self.hold(g.address)
            relapses = 0 if calm else held.relapses
            self._held[g.address] = _Held(now, 0, relapses, held.since, held.improved)
            return g
        held.clear += 1
        if held.clear >= self.hold(g.address):
            self._held[g.address] = _Held(now, relapses=held.relapses, improved=True)
            return g
        kept = Health(held.health.state, held.health.reasons, now.signals)
        return replace(g, health=kept)
