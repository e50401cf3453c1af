"""Every label profile, by name: the one list the scan, the CLI, the configuration and docs read.

- A new profile is one module with a ``PROFILE`` and one line here.
- A profile's module is imported when the profile is first looked up, not before.
  So a scan with the default profile never loads the vendor profiles' label code.
  That keeps ``nfd-gpu scan`` start-up short.
  ``nfd-gpu --help`` lists the names without loading any.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping

from nfd_gpu.labels.profile import Profile


def _neutral() -> Profile:
    from nfd_gpu.labels import neutral  # lazy: see the module docstring

    return neutral.PROFILE


def _nvidia() -> Profile:
    from nfd_gpu.labels import nvidia  # lazy: as above

    return nvidia.PROFILE


def _amd() -> Profile:
    from nfd_gpu.labels import amd  # lazy: as above

    return amd.PROFILE


def _intel() -> Profile:
    from nfd_gpu.labels import intel  # lazy: as above

    return intel.PROFILE


# profile name -> the PROFILE of its module (which has that name), in order
_LOADERS: dict[str, Callable[[], Profile]] = {
    "neutral": _neutral,
    "nvidia": _nvidia,
    "amd": _amd,
    "intel": _intel,
}


class _Profiles(Mapping[str, Profile]):
    """The profiles by name, in order; each module imported on first use."""

    def __init__(self, loaders: Mapping[str, Callable[[], Profile]]) -> None:
        self._loaders = dict(loaders)
        self._loaded: dict[str, Profile] = {}

    def __getitem__(self, name: str) -> Profile:
        profile = self._loaded.get(name)
        if profile is None:
            profile = self._loaders[name]()  # KeyError: not a profile
            if profile.name != name:
                raise RuntimeError(f"label profile {name!r} is named {profile.name!r}")
            self._loaded[name] = profile
        return profile

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders


PROFILES: Mapping[str, Profile] = _Profiles(_LOADERS)
DEFAULT = ("neutral",)


def known() -> str:
    """Return the profile names, comma-separated, for messages."""
    return ", ".join(PROFILES)


def unknown(names: Iterable[str]) -> str | None:
    """Return the first name that is not a profile, or None when all are."""
    return next((n for n in names if n not in PROFILES), None)


@functools.cache
def label_namespaces() -> tuple[str, ...]:
    """Return every label namespace the profiles write by default, in profile order.

    It is what the admission policy under deploy/ lets the agent publish; tests/deploy checks it.
    """
    seen: dict[str, None] = {}
    for profile in PROFILES.values():
        seen.update(dict.fromkeys(profile.namespaces))
    return tuple(seen)
