"""Every label profile, by name: the one list the scan, the CLI, the configuration and the
docs read. A new profile is one module with a ``PROFILE`` and one line here."""

from __future__ import annotations

from collections.abc import Iterable

from nfd_gpu.labels import amd, intel, neutral, nvidia
from nfd_gpu.labels.profile import Profile

PROFILES: dict[str, Profile] = {
    p.name: p for p in (neutral.PROFILE, nvidia.PROFILE, amd.PROFILE, intel.PROFILE)
}
DEFAULT = ("neutral",)


def known() -> str:
    """The profile names, comma-separated (for messages)."""
    return ", ".join(PROFILES)


def unknown(names: Iterable[str]) -> str | None:
    """The first name that is not a profile, or None when all are."""
    return next((n for n in names if n not in PROFILES), None)
