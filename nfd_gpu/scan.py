"""One pass: discover -> snapshot -> label. Never raises for hardware problems."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nfd_gpu.discovery.nvidia.session import NvmlSession
from nfd_gpu.discovery.registry import SOURCES
from nfd_gpu.discovery.source import Context, Source, wanted
from nfd_gpu.featuremap import NFD_ONLY_PCI, PCI_DEVICE, snapshot_features
from nfd_gpu.features import Features
from nfd_gpu.health import HealthOptions, HealthTracker, judge_gpus
from nfd_gpu.host import HostRoot
from nfd_gpu.labels.neutral import NAMESPACE
from nfd_gpu.labels.profile import LabelOptions
from nfd_gpu.labels.registry import DEFAULT, PROFILES
from nfd_gpu.labels.registry import known as known_profiles
from nfd_gpu.labels.validate import filter_labels
from nfd_gpu.model import Snapshot
from nfd_gpu.record import replace

if TYPE_CHECKING:
    from nfd_gpu.labels.nvidia import NvidiaOptions


@dataclass
class ScanResult:
    """One scan: the snapshot, its labels and features, and what went wrong on the way."""

    snapshot: Snapshot
    labels: dict[str, str]
    features: Features
    warnings: list[str] = field(default_factory=list)
    rule_errors: list[tuple[str, str]] = field(default_factory=list)  # (rule, message)
    # failures that make the result incomplete (out of descriptors or memory, a listing
    # that failed): not a description of the host, never to be published
    errors: list[str] = field(default_factory=list)
    rule_labels: int = 0  # how many of the labels the rules set

    @property
    def complete(self) -> bool:
        return not self.errors

    @property
    def gpu_count_by_vendor(self) -> dict[str, int]:
        return dict(Counter(g.vendor for g in self.snapshot.gpus))


def discover(
    host: HostRoot,
    *,
    nvml_lib: ModuleType | None = None,
    nvml: NvmlSession | None = None,
    sources: Sequence[Source] = SOURCES,
    nfd_attributes: bool = True,
) -> Snapshot:
    """Read the host into a :class:`Snapshot`; read-only, failures become warnings.

    - Runs each source of :data:`~nfd_gpu.discovery.registry.SOURCES`, or of ``sources``,
      in order. Sources whose vendors have no GPU here are skipped.
    - ``nvml_lib`` replaces the NVML library; ``nfd-gpu snapshot`` records through it.
    - ``nvml`` is the NVML session: the mode, and the agent's state kept between passes.
    - ``nfd_attributes=False`` skips what only NFD's ``pci.device`` feature carries.
      See :attr:`~nfd_gpu.discovery.source.Context.nfd_attributes`.
    """
    if nvml is not None:
        nvml.status = "none"  # until NVIDIA GPUs ask it
    ctx = Context(host, nvml_lib=nvml_lib, nvml=nvml, nfd_attributes=nfd_attributes)
    snap = Snapshot(root=host.root)
    for source in sources:
        if wanted(source, snap):
            snap = source.discover(ctx, snap)
    return replace(snap, warnings=tuple(host.warnings))


def label(
    snap: Snapshot,
    profiles: Sequence[str] = DEFAULT,
    namespace: str = NAMESPACE,
    nvidia_options: NvidiaOptions | None = None,
    profile_options: Sequence[str] = (),
) -> tuple[dict[str, str], list[str]]:
    """Return the labels of the chosen profiles, validated; invalid ones dropped with a warning.

    ``profile_options`` are names from :data:`nfd_gpu.labels.options.PROFILE_OPTIONS`.
    """
    opts = LabelOptions(namespace, nvidia_options, tuple(profile_options))
    warnings: list[str] = []
    labels: dict[str, str] = {}
    for p in profiles:
        profile = PROFILES.get(p)
        if profile is None:
            raise ValueError(f"unknown label profile {p!r} (known: {known_profiles()})")
        labels.update(profile.labels(snap, opts, warnings))
    return filter_labels(labels, warnings), warnings


class RuleOutputs:
    """The last rule output of one caller, reused while the rule set and features are unchanged.

    - An agent is one caller: one per :class:`~nfd_gpu.agent.Agent`.
    - Each caller owns its own, so two agents in one process do not evict each other's.
    - A one-shot scan passes none and evaluates in full.
    """

    def __init__(self) -> None:
        self._last: tuple[Any, Any, Any] | None = None  # (rule set, fingerprint, output)
        self._memo: Any = None  # the rules' last results (rules.memo.RuleMemo)

    def output(self, ruleset: Any, feats: Features, evaluate: Callable[..., Any]) -> Any:
        """Return the last output while the rule set and features are the same, else evaluate.

        - Only the rules the change reaches run again: :class:`~nfd_gpu.rules.memo.RuleMemo`.
        - The rule set is fingerprinted by identity. It is immutable; a changed file loads
          a new one.
        - The features are fingerprinted by what the rules can read of them:
          ``RuleMemo.fingerprint``. On an SR-IOV host that is not every PCI function's
          every attribute.
        - Evaluation depends on nothing else: no clock, no environment.
        """
        if self._memo is None:
            from nfd_gpu.rules.memo import RuleMemo  # lazy: only when rules are used

            self._memo = RuleMemo()
        fingerprint = self._memo.fingerprint(ruleset, feats)
        last = self._last
        if last is not None and last[0] is ruleset and last[1] == fingerprint:
            return last[2]
        out = evaluate(ruleset, feats, memo=self._memo)
        self._last = (ruleset, fingerprint, out)
        return out


def run_scan(
    root: str | os.PathLike[str] = "/",
    *,
    profiles: Sequence[str] = DEFAULT,
    rules_path: str | os.PathLike[str] | None = None,
    tolerant_rules: bool = False,
    namespace: str = NAMESPACE,
    nvidia_options: NvidiaOptions | None = None,
    profile_options: Sequence[str] = (),
    nvml: str | NvmlSession = "auto",
    nfd_attributes: bool = True,
    rules: Any = None,
    health: HealthOptions | HealthTracker | None = None,
    rule_outputs: RuleOutputs | None = None,
) -> ScanResult:
    """Discover, label and apply custom rules.

    Hardware problems are warnings, never exceptions.

    - ``nvml``: ``auto``, ``on``, ``off``, or the agent's session.
      With ``on``, NVML not answering on a node with NVIDIA GPUs raises
      :class:`~nfd_gpu.discovery.nvidia.session.NvmlRequired`.
    - An invalid rule file raises :class:`nfd_gpu.rules.RuleError`, unless ``tolerant_rules``.
      The agent sets it: then broken rules are skipped and reported as warnings and rule errors.
      The valid ones still apply.
    - ``rules``: a loaded :class:`~nfd_gpu.rules.RuleSet` instead of ``rules_path``.
      The agent passes its own, which keeps each file's last valid version: ``agent/rulefiles.py``.
    - ``nfd_attributes=False`` skips the ``pci.device`` feature's two IOMMU attributes.
      That saves two failed opens per PCI function on most hosts.
      Use it when nothing reads that feature: no features printed.
      A rule that can see them still gets them: it names one, or has a ``matchName`` or a
      template over ``pci.device`` (``RuleSet.sees``).
    - ``rule_outputs``: the caller's :class:`RuleOutputs`, the agent's.
      It reuses the last rule output while the features and the rule set are unchanged.
      Without it the rules are evaluated.
    """
    if rules is None and rules_path is not None:
        from nfd_gpu.rules import load_rules  # lazy: only when rules are used

        rules = load_rules(os.fspath(rules_path), tolerant=tolerant_rules)
    host = HostRoot(root)
    session = NvmlSession(nvml) if isinstance(nvml, str) else nvml
    try:
        # the IOMMU attributes only when something sees them: a rule that names one (most
        # rules never do: two reads per PCI function saved, thousands on an SR-IOV host)
        nfd = nfd_attributes or (rules is not None and rules.sees(PCI_DEVICE, NFD_ONLY_PCI))
        snap = discover(host, nvml=session, nfd_attributes=nfd)
    finally:
        host.close()
    if isinstance(health, HealthTracker):
        snap = health.apply(snap, complete=not host.errors)
    else:
        snap = judge_gpus(snap, health or HealthOptions())
    labels, warnings = label(snap, profiles, namespace, nvidia_options, profile_options)
    feats = snapshot_features(snap)
    all_warnings = list(snap.warnings) + warnings
    rule_errors: list[tuple[str, str]] = []
    rule_labels = 0
    if rules is not None:
        from nfd_gpu.rules import evaluate  # lazy: as above

        # nfd-gpu's own health and counts are refused (rule named); the rest override
        # built-in labels, as in nfd-master
        own = functools.partial(evaluate, own_ns=namespace)
        out = own(rules, feats) if rule_outputs is None else rule_outputs.output(rules, feats, own)
        labels.update(out.labels)
        rule_labels = len(out.labels)
        rule_errors = [("load", p) for p in rules.problems] + list(out.errors)
        all_warnings += [f"rules: {p}" for p in rules.problems]
        all_warnings += [f"rule {name}: {msg}" for name, msg in out.errors]
    return ScanResult(
        snapshot=snap,
        labels=labels,
        features=feats,
        warnings=all_warnings,
        rule_errors=rule_errors,
        errors=list(host.errors),
        rule_labels=rule_labels,
    )
