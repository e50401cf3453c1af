"""Profile options: opt-in label groups of the compatibility profiles.

- One table, :data:`PROFILE_OPTIONS`, declares every option: its name, the profile, and
  what it adds. The name is prefixed with the profile it belongs to.
- ``--profile-option NAME`` turns one on. It is repeatable.
  ``NFD_GPU_PROFILE_OPTIONS`` and config ``profile_options`` take a comma-separated list.
- docs/configuration.md lists them; a test checks it.

The ``amd`` profile:

- Its defaults are the AMD node labeller's with its sample DaemonSet flags:
  ``-vram -cu-count -simd-count -device-id -family -product-name``.
- The other labeller flags are options here.
- ``amd-no-<kind>`` drops one default kind, as leaving its flag out does.
  The labeller's Helm chart leaves out ``-product-name``: ``amd-no-product-name``.
- The GPU operator's labeller adds ``-driver-version``.
"""

from __future__ import annotations

from collections.abc import Iterable

# The amd profile's default label kinds (the labeller's sample DaemonSet flags), in the
# order nfd_gpu.labels.amd writes them
AMD_KINDS = ("device-id", "product-name", "vram", "simd-count", "cu-count", "family")

# name -> (profile, what it adds)
PROFILE_OPTIONS: dict[str, tuple[str, str]] = {
    "amd-beta": (
        "amd",
        "beta.amd.com/gpu.<kind> and beta.amd.com/gpu.<kind>.<value>=<count> "
        "(the labeller always writes them)",
    ),
    "amd-driver-version": ("amd", "amd.com/gpu.driver-version (labeller -driver-version)"),
    "amd-driver-src-version": (
        "amd",
        "amd.com/gpu.driver-src-version (labeller -driver-src-version)",
    ),
    "amd-compute-memory-partition": (
        "amd",
        "amd.com/gpu.compute-memory-partition (labeller -compute-memory-partition)",
    ),
    "amd-compute-partitioning-supported": (
        "amd",
        "amd.com/gpu.compute-partitioning-supported (labeller -compute-partitioning-supported)",
    ),
    "amd-memory-partitioning-supported": (
        "amd",
        "amd.com/gpu.memory-partitioning-supported (labeller -memory-partitioning-supported)",
    ),
    "amd-mode": ("amd", "amd.com/gpu.mode (the GPU operator's KubeVirt labeller)"),
    "amd-require-amdgpu": (
        "amd",
        "no amd.com label unless an AMD GPU is bound to amdgpu (the labeller finds GPUs "
        "through amdgpu and exits without labels otherwise)",
    ),
    # the default kinds, one by one off (the labeller without that flag)
    **{
        f"amd-no-{kind}": (
            "amd",
            f"no amd.com/gpu.{kind} (nor its beta.amd.com and count keys): the labeller "
            f"without -{kind}",
        )
        for kind in AMD_KINDS
    },
}


def check(options: Iterable[str], profiles: Iterable[str]) -> str | None:
    """Return None when every option is known and its profile selected, else the problem."""
    chosen = set(profiles)
    for name in options:
        if name not in PROFILE_OPTIONS:
            return f"unknown profile option {name!r} (known: {', '.join(PROFILE_OPTIONS)})"
        profile = PROFILE_OPTIONS[name][0]
        if profile not in chosen:
            return f"profile option {name!r} needs the {profile} profile"
    return None


def selected(profile: str, options: Iterable[str]) -> frozenset[str]:
    """Return the options selected for one profile, without the ``<profile>-`` prefix."""
    prefix = f"{profile}-"
    return frozenset(o.removeprefix(prefix) for o in options if o.startswith(prefix))
