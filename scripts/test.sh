#!/usr/bin/env bash
# Lint, type-check and test. Run from the repository root inside the venv.
set -uo pipefail
cd "$(dirname "$0")/.."
ruff check nfd_gpu tests benchmarks scripts image || exit 1
ruff format --check nfd_gpu tests benchmarks scripts image || exit 1
mypy || exit 1
# Dead code: what vulture reports is unused; names used dynamically (typer callbacks,
# http.server hooks, dataclass fields written as JSON) are listed in the whitelist.
vulture nfd_gpu scripts/vulture_whitelist.py || exit 1
# pytest exits 5 when it collected no test: that is a failure here, not a pass.
verdict() {  # verdict RC WHAT: 0 for a pass, 1 otherwise (5, nothing collected, too)
  if [ "$1" -eq 5 ]; then echo "pytest collected no tests ($2)" >&2; return 1; fi
  [ "$1" -eq 0 ] || { echo "pytest failed ($2): exit $1" >&2; return 1; }
}
if [ "$#" -gt 0 ] || [ -n "${NFD_GPU_TEST_SERIAL:-}" ]; then
  pytest -q "$@"
  verdict $? "pytest $*"
  exit $?
fi
# The whole suite as two pytest processes side by side, about even, so both cores stay busy:
# tests/e2e (mostly waiting on kube-apiserver, etcd, nfd-master and the Go judges it starts)
# and tests/node (a real kubelet and containerd: waiting on pods) with the pod-view tests
# (CPU-bound: 640 agent scans) beside everything else, the GFD judge (CPU-bound, no
# cluster) included. The second process's output is printed after the
# first's, whole. NFD_GPU_TEST_SERIAL=1 runs one process, as `pytest -q` would.
judge=tests/e2e/test_gfd_judge.py
beside=(tests/deploy/test_pod_view.py)
for f in tests/e2e/test_*.py tests/node/test_*.py; do [ "$f" = "$judge" ] || beside+=("$f"); done
ignore=()
for f in "${beside[@]}"; do ignore+=("--ignore=$f"); done
beside_log=$(mktemp)
trap 'rm -f "$beside_log"' EXIT
pytest -q -p no:cacheprovider "${beside[@]}" >"$beside_log" 2>&1 &
beside_pid=$!
pytest -q "${ignore[@]}"
rest=$?
wait "$beside_pid"
second=$?
echo "--- tests/e2e, tests/node and tests/deploy/test_pod_view.py (run beside the rest) ---"
cat "$beside_log"
ok=0
verdict "$rest" "all but tests/e2e, tests/node and the pod view" || ok=1
verdict "$second" "tests/e2e, tests/node and the pod view" || ok=1
exit $ok
