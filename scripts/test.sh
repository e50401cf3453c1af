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
# The whole suite as two pytest processes side by side: tests/e2e (mostly waiting on
# kube-apiserver, etcd, nfd-master and the Go judges it starts) beside everything else,
# which keeps both cores busy. The e2e output is printed after the rest's, whole.
# NFD_GPU_TEST_SERIAL=1 runs one process, as `pytest -q` would.
# The GFD judge (CPU-bound, no cluster) runs in the other process, to even the two out.
judge=tests/e2e/test_gfd_judge.py
others=()
for f in tests/e2e/test_*.py; do [ "$f" = "$judge" ] || others+=("--ignore=$f"); done
e2e_log=$(mktemp)
trap 'rm -f "$e2e_log"' EXIT
pytest -q -p no:cacheprovider tests/e2e "--ignore=$judge" >"$e2e_log" 2>&1 &
e2e_pid=$!
pytest -q "${others[@]}"
rest=$?
wait "$e2e_pid"
e2e=$?
echo "--- tests/e2e (run beside the rest) ---"
cat "$e2e_log"
ok=0
verdict "$rest" "all but tests/e2e" || ok=1
verdict "$e2e" "tests/e2e" || ok=1
exit $ok
