#!/usr/bin/env bash
# Build the Go test harness into tests/e2e/bin/ (git-ignored).
# Idempotent and cached: Go's build cache makes a rebuild with no change take
# about a second; modules come from the Go module proxy into the module cache.
# Usage: bash tests/e2e/build.sh [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")"
BIN="$PWD/bin"
mkdir -p "$BIN"
command -v go >/dev/null || { echo "build.sh: go not found (install Go >= 1.26)" >&2; exit 1; }

# name -> package, relative to tests/e2e/go (this project's module).
declare -A LOCAL=(
  [nfd-oracle]=./cmd/nfd-oracle
)

build_local() {
  local name=$1 pkg=$2
  echo "build.sh: $name" >&2
  (cd go && go build -trimpath -o "$BIN/$name" "$pkg")
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=("${!LOCAL[@]}")
fi
for t in "${targets[@]}"; do
  if [ -n "${LOCAL[$t]:-}" ]; then
    build_local "$t" "${LOCAL[$t]}"
  else
    echo "build.sh: unknown target $t (known: ${!LOCAL[*]})" >&2
    exit 2
  fi
done
