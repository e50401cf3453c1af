#!/usr/bin/env bash
# Build the GFD judge, tests/e2e/bin/gfd-judge: GPU Feature Discovery's own labelers
# (github.com/NVIDIA/k8s-device-plugin, pinned below: the module proxy serves v0.19.0)
# driven by our harness in tests/e2e/gfd/ (an nvml.Interface answering an NVML recording).
# The harness imports the module's internal/ packages, which Go allows only from inside
# that module: the downloaded module is copied into tests/e2e/bin/gfd-src/ and the
# harness placed there as cmd/gfd-judge/. Nothing of the module is changed.
#
# Idempotent and cached like build.sh: rebuilt only when older than this script or a
# harness file; GOMODCACHE / GOCACHE make a rebuild cheap.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
out="$bin/gfd-judge"
module=github.com/NVIDIA/k8s-device-plugin@v0.19.0
mkdir -p "$bin"
command -v go >/dev/null || { echo "build-gfd.sh: go not found on PATH" >&2; exit 1; }
# go-nvml's package is cgo (its dlopen wrapper), even though the harness never loads
# libnvidia-ml: a C compiler is needed (Debian: gcc libc6-dev).
command -v "${CC:-gcc}" >/dev/null || { echo "build-gfd.sh: no C compiler (gcc) for go-nvml's cgo" >&2; exit 1; }

# The fake libcuda.so.1 GFD's tegra strategy loads (tests/e2e/gfd/fakecuda/fakecuda.c).
fake="$bin/fakecuda/libcuda.so.1"
if [ ! -e "$fake" ] || [ "$here/gfd/fakecuda/fakecuda.c" -nt "$fake" ]; then
  mkdir -p "$bin/fakecuda"
  "${CC:-gcc}" -shared -fPIC -O2 -Wall -Wextra -Werror -o "$fake.tmp" "$here/gfd/fakecuda/fakecuda.c"
  mv -f "$fake.tmp" "$fake"
fi
# GFD_SRC=DIR: the harness over another k8s-device-plugin tree (the newest GFD, a fetched
# checkout of its main) into bin/gfd-judge-newest; local only (CI reaches only the module
# proxy). Its vendor/ lacks go-nvml's mock package: built with -mod=mod (module proxy).
if [ -n "${GFD_SRC:-}" ]; then
  src="$bin/gfd-src-newest"
  rm -rf "$src"
  cp -R "$GFD_SRC" "$src"
  chmod -R u+w "$src"
  mkdir -p "$src/cmd/gfd-judge"
  cp "$here"/gfd/*.go "$src/cmd/gfd-judge/"
  (cd "$src" && CGO_ENABLED=1 GOFLAGS=-mod=mod go build -trimpath -o "$bin/gfd-judge-newest" ./cmd/gfd-judge)
  printf '%s\n' "${GFD_SRC_VERSION:-$GFD_SRC}" >"$bin/gfd-judge-newest.version"
  echo "build-gfd.sh: gfd-judge-newest built from $GFD_SRC (run with GFD_JUDGE=$bin/gfd-judge-newest)"
  exit 0
fi
if [ -e "$out" ] && [ -z "$(find "$here/gfd" "$here/build-gfd.sh" -type f -newer "$out" -print -quit)" ]; then
  echo "build-gfd.sh: gfd-judge up to date"
  exit 0
fi
start=$SECONDS
# Downloaded outside any module of ours (-mod=mod: no go.mod here to be read-only about).
dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[ -n "$dir" ] || { echo "build-gfd.sh: $module not downloaded" >&2; exit 1; }
src="$bin/gfd-src"
rm -rf "$src"
cp -R "$dir" "$src"
chmod -R u+w "$src"
mkdir -p "$src/cmd/gfd-judge"
cp "$here"/gfd/*.go "$src/cmd/gfd-judge/"
(cd "$src" && CGO_ENABLED=1 go build -mod=readonly -trimpath -o "$out.tmp" ./cmd/gfd-judge)
mv -f "$out.tmp" "$out"
printf '%s\n' "${module#*@}" >"$bin/gfd-judge.version"
echo "build-gfd.sh: gfd-judge ($module) built in $((SECONDS - start))s"
