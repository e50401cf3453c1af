"""Read the device plugin's and GFD's ``--sharing-config`` file into the nvidia profile's options.

- The file is configuration input: ``nfd-gpu scan`` reads it once, the agent every pass.
  A bad file is a warning in the agent.
- The label code gets only the typed result: :class:`~nfd_gpu.labels.nvidia.NvidiaOptions`.
  :func:`nvidia_options` builds it for both.
"""

from __future__ import annotations

from typing import Any

from nfd_gpu.labels.nvidia import GFD_MIG_STRATEGIES, MIG_STRATEGIES, NvidiaOptions


def _read(path: str) -> dict[str, Any]:
    """Return the top-level mapping of a YAML or JSON file; an empty file is an empty mapping."""
    from nfd_gpu.config import yamlfile  # lazy: YAML is loaded only when a sharing config is given

    try:
        return yamlfile.load_mapping(path, {"yaml": "not YAML/JSON ({detail})"})
    except yamlfile.YamlFileError as exc:
        raise ValueError(str(exc)) from None


def _block(path: str, key: str, block: object) -> tuple[dict[str, int], bool]:
    """Return replicas by resource name, and renameByDefault, of ``sharing.<key>``."""
    if not isinstance(block, dict):
        raise ValueError(f"{path}: sharing.{key}: expected a mapping")
    if not block.get("resources"):
        raise ValueError(f"{path}: sharing.{key}: no resources specified")
    replicas: dict[str, int] = {}
    for i, r in enumerate(block["resources"]):
        where = f"{path}: sharing.{key}.resources[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("name"), str):
            raise ValueError(f"{where}: expected name and replicas")
        # GFD rejects the whole file for a resource without replicas or with fewer than 2
        # (device plugin api/config/v1/replicas.go:246,255, v0.19.0)
        if "replicas" not in r:
            raise ValueError(f"{where}: no replicas specified")
        n = r["replicas"]
        if not isinstance(n, int) or isinstance(n, bool):
            raise ValueError(f"{where}.replicas: expected an integer")
        if n < 2:
            raise ValueError(f"{where}.replicas: {n}: number of replicas must be >= 2")
        replicas[r["name"]] = n
    return replicas, bool(block.get("renameByDefault", False))


def load_sharing_config(
    path: str, mig_strategy: str | None = None, timestamp: int | None = None
) -> NvidiaOptions:
    """Build :class:`NvidiaOptions` from a device-plugin or GFD config file: YAML or JSON, ``v1``.

    - Reads ``sharing.timeSlicing`` and ``sharing.mps``: ``renameByDefault``, and
      ``resources`` of ``name`` + ``replicas``.
    - Reads ``flags.migStrategy``, ``flags.failOnInitError`` and
      ``flags.deviceDiscoveryStrategy``: auto, nvml or vfio.
    - ``mig_strategy``, from a flag or the environment, wins over the file.
    - Raises ``ValueError`` with a one-line message.
    """
    doc = _read(path)
    version = doc.get("version", "v1")
    if version != "v1":
        raise ValueError(f"{path}: unknown version {version!r} (expected v1)")
    flags = doc.get("flags") or {}
    if not isinstance(flags, dict):
        raise ValueError(f"{path}: flags: expected a mapping")
    # GFD's precedence (api/config/v1/flags.go updateFromCLIFlag: a flag or variable that is
    # set applies, whatever its value), then the file, then the default
    strat = mig_strategy if mig_strategy is not None else flags.get("migStrategy")
    strat = strat or NvidiaOptions.mig_strategy
    if strat not in MIG_STRATEGIES:
        gfd = GFD_MIG_STRATEGIES
        raise ValueError(
            f"{path}: flags.migStrategy: {strat!r} is not {', '.join(gfd[:-1])} or {gfd[-1]}"
        )
    sharing = doc.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise ValueError(f"{path}: sharing: expected a mapping")
    found = {
        name: _block(path, key, sharing[key])
        for key, name in (("timeSlicing", "time-slicing"), ("mps", "mps"))
        if sharing.get(key) is not None
    }

    # The device plugin's api/config/v1/sharing.go: the strategy is MPS when the mps block
    # has replicas > 1, else time-slicing when that block has; the replicas are the mps
    # block's whenever it exists.
    def replicated(name: str) -> bool:
        return name in found and any(n > 1 for n in found[name][0].values())

    active = "mps" if "mps" in found else "time-slicing"
    strategy_name = next((n for n in ("mps", "time-slicing") if replicated(n)), "")
    fail, discovery = _fail_on_init_error(path, flags), _discovery(path, flags)
    if not strategy_name or active not in found:
        return NvidiaOptions(
            mig_strategy=strat, timestamp=timestamp, fail_on_init_error=fail, discovery=discovery
        )
    replicas, rename = found[active]
    return NvidiaOptions(strat, strategy_name, replicas, rename, timestamp, fail, discovery)


# flags.deviceDiscoveryStrategy values GFD accepts (cmd/gpu-feature-discovery/main.go
# validateFlags); nfd-gpu finds GPUs as each does (nfd_gpu.labels.nvidia_vfio, nvidia_tegra)
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra", "vfio")


def _discovery(path: str, flags: dict[str, Any]) -> str:
    """Return the file's ``flags.deviceDiscoveryStrategy``; auto by default."""
    found = flags.get("deviceDiscoveryStrategy", "auto")
    if found not in DISCOVERY_STRATEGIES:
        raise ValueError(f"{path}: flags.deviceDiscoveryStrategy: invalid option {found!r}")
    return str(found)


def _fail_on_init_error(path: str, flags: dict[str, Any]) -> bool:
    """Return GFD's ``flags.failOnInitError``; true by default."""
    fail = flags.get("failOnInitError", True)
    if not isinstance(fail, bool):
        raise ValueError(f"{path}: flags.failOnInitError: expected true or false")
    return fail


def nvidia_options(
    mig_strategy: str | None = None, sharing_config: str | None = None, timestamp: int | None = None
) -> NvidiaOptions:
    """Build the nvidia profile's options from its settings, for ``scan`` and the agent alike.

    - ``mig_strategy`` None: not given by flag, ``NFD_GPU_MIG_STRATEGY`` or config file.
      Then the sharing config's ``flags.migStrategy`` decides.
      Else the default: ``none``, GFD's.
    - A given strategy wins over the file whatever its value, as in GFD.
    - Raises ``ValueError`` in one line for an unknown strategy or a bad sharing config.
    """
    if mig_strategy is not None and mig_strategy not in MIG_STRATEGIES:
        raise ValueError(f"mig strategy {mig_strategy!r}: expected {', '.join(MIG_STRATEGIES)}")
    if sharing_config is None:
        return NvidiaOptions(mig_strategy or NvidiaOptions.mig_strategy, timestamp=timestamp)
    return load_sharing_config(sharing_config, mig_strategy, timestamp)
