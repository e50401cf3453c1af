"""Names vulture (dead-code finder, ``scripts/test.sh``) cannot see being used.

Each line names something used dynamically: by a framework, a protocol, Python itself,
or data output. vulture parses this file (it is never run; the imports only make the
names resolvable for linters): ``vulture nfd_gpu scripts/vulture_whitelist.py``.
Anything else it reports is dead: delete it (a name used only by tests is dead too).
"""

# ruff: noqa: B018
from nfd_gpu import cli, model, rules, scan
from nfd_gpu.cli import rules as rules_cli
from nfd_gpu.discovery.nvidia import replay as nvml_replay
from nfd_gpu.health import signals as health_signals
from nfd_gpu.labels import amd, intel, neutral, nvidia
from nfd_gpu.rules import expressions, yamldocs
from nfd_gpu.sinks import kubeclient, kubesockets

# typer: callbacks and commands registered by decorator
cli._root
rules_cli.test
# click: the root group's command lookup; the commands it builds by name (cli.COMMANDS)
cli.Commands.list_commands
cli.inventory.inventory
# PEP 562 module __getattr__ (nfd_gpu.rules imports its parts on first use)
rules.__getattr__
# kubernetes / urllib3 configuration attributes set for the library to read
kubeclient.build_api_client.retries
kubeclient.new_configuration.connection_pool_maxsize
kubesockets.track_sockets.pool_classes_by_scheme
# google-re2 Options attribute read by the library
expressions.compile_go_regexp.log_errors
# dataclass fields written to the snapshot JSON (nfd-gpu scan --format json, snapshots)
model.AmdGpu.compute_partitions_available
model.AmdGpu.memory_partitions_available
model.DeviceNode.char_device
model.Runtime.dev_visible
# the snapshot model's public JSON round trip (the other half of to_json)
model.Snapshot.from_json
# the scan result's public API (callers ask ``complete``; the agent reads ``errors``)
scan.ScanResult.complete
# the NVML replay keeps NVML's own signatures (arguments it does not need included)
nvml_replay._Replay.nvmlGpuInstanceGetComputeInstanceProfileInfo.eng

# a profile's key lookup in its label table (the docs tests' check that every emitted key
# is documented: tests/labels/test_docs.py)
amd.documented
intel.documented
neutral.documented
nvidia.documented
# typing only: the bound of model's TypeVar, named in a string
model.DataclassInstance
# click's Option attribute, read by typer's help formatter (run --help names NFD_GPU_*)
cli.options.TyperOption.show_envvar
# the signal table's text, read by scripts/health_docs.py into docs/health.md
health_signals.Signal.meaning
# PyYAML's composer and constructor call or reset these on the loader (rules/loader.py)
yamldocs._Loader.descend_resolver
yamldocs._Loader.ascend_resolver
yamldocs._constructed.constructed_objects
yamldocs._constructed.recursive_objects
yamldocs._constructed.state_generators
yamldocs._constructed.deep_construct
