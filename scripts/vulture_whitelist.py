"""Names vulture (dead-code finder, ``scripts/test.sh``) cannot see being used.

Each line names something used dynamically: by a framework, a protocol, Python itself,
or data output. vulture parses this file (it is never run; the imports only make the
names resolvable for linters): ``vulture nfd_gpu scripts/vulture_whitelist.py``.
Anything else it reports is dead: delete it (a name used only by tests is dead too).
"""

# ruff: noqa: B018
from nfd_gpu import cli, metrics, model, rules, run_cli, scan
from nfd_gpu.discovery import amd as amd_discovery
from nfd_gpu.discovery import nvidia_facts, nvidia_vgpu, nvml_replay, pciids
from nfd_gpu.labels import amd, intel, neutral, nvidia
from nfd_gpu.rules import cli as rules_cli
from nfd_gpu.rules import expressions
from nfd_gpu.sinks import nodefeature

# typer: callbacks and commands registered by decorator
cli._root
run_cli.main
rules_cli.test
# PEP 562 module __getattr__ (nfd_gpu.rules imports its parts on first use)
rules.__getattr__
# http.server / socketserver hooks and class attributes they read
metrics._BoundedServer.daemon_threads
metrics._BoundedServer.request_queue_size
metrics._BoundedServer.handle_error
metrics.MetricsServer.log_message  # BaseHTTPRequestHandler hooks (a local Handler class)
metrics.MetricsServer.do_GET
# kubernetes / urllib3 configuration attributes set for the library to read
nodefeature.build_api_client.retries
nodefeature.build_api_client.pool_classes_by_scheme
# google-re2 Options attribute read by the library
expressions.compile_go_regexp.log_errors
# dataclass fields written to the snapshot JSON (nfd-gpu scan --format json, snapshots)
model.Gpu.xcc_count
model.Gpu.compute_partitions_available
model.Gpu.memory_partitions_available
model.DeviceNode.char_device
model.Runtime.dev_visible
nvidia_facts.NvidiaFacts.mig_pending
nvidia_facts.NvidiaFacts.max_mig_devices
amd_discovery.KfdNode.render_minor
# the snapshot model's public JSON round trip (the other half of to_json)
model.Snapshot.from_json
# the scan result's public API (callers ask ``complete``; the agent reads ``errors``)
scan.ScanResult.complete
# the NVML replay keeps NVML's own signatures (arguments it does not need included)
nvml_replay.build.eng

# Unused, in areas other #13 helpers are reworking now (discovery/, labels/): reported to
# the lead, to be deleted there (or used) -- then delete these lines.
nvidia_vgpu.vendor_capability  # tests only
pciids.PciIds.vendor_name
amd.documented  # tests only (the label tables are the documentation)
intel.documented  # tests only
neutral.documented  # tests only
nvidia.SHARING_STRATEGIES
