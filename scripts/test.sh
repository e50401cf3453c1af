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
pytest -q "$@"
rc=$?
# pytest exits 5 when it collected no test: that is a failure here, not a pass.
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi
exit $rc
