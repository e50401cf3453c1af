#!/usr/bin/env bash
# Build the e2e judges into tests/e2e/bin/ (git-ignored) from the Go module in
# tests/e2e/go: kube-apiserver and kubectl (k8s.io/kubernetes), nfd-master and nfd-worker
# (sigs.k8s.io/node-feature-discovery), etcd (go.etcd.io/etcd/server/v3 at the
# version k8s.io/kubernetes requires; Debian 12's etcd-server 3.4 is too old for
# kube-apiserver v1.35, see cmd/etcd/main.go), nfd-oracle (ours, when present), dra-cel
# (ours: DRA selectors through k8s.io/dynamic-resource-allocation/cel),
# and NFD's CRDs, deployment manifests and Helm chart plus the Prometheus Operator
# PodMonitor CRD as data files.
#
# Idempotent and cached: a binary is rebuilt only when it is older than
# go.mod/go.sum or a source file of ours; Go's own module and build caches
# (GOMODCACHE, GOCACHE) make a rebuild after a change cheap.
#
# Usage: bash tests/e2e/build.sh [TARGET...]   (default: every target)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gomod="$here/go"
bin="$here/bin"
mkdir -p "$bin"

command -v go >/dev/null || { echo "build.sh: go not found on PATH (Go >= 1.26 needed)" >&2; exit 1; }

# name -> package path (relative packages are ours, inside tests/e2e/go)
targets=(
  "kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver"
  "kubectl k8s.io/kubernetes/cmd/kubectl"
  "nfd-master sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
  "nfd-worker sigs.k8s.io/node-feature-discovery/cmd/nfd-worker"
  "etcd ./cmd/etcd"
  "dra-cel ./cmd/dra-cel"
)
if [ -d "$gomod/cmd/nfd-oracle" ]; then
  targets+=("nfd-oracle ./cmd/nfd-oracle")
fi

up_to_date() {  # $1 = output; true when it is newer than every input (and this script)
  local out="$1"
  [ -e "$out" ] || return 1
  [ -z "$(find "$gomod" "$here/build.sh" -type f -newer "$out" -print -quit)" ]
}

# nfd-worker's local source reads a fixed directory,
# /etc/kubernetes/node-feature-discovery/features.d/ (a string variable in
# source/local, no flag), and its other sources read the host through
# pkg/utils/hostpath's pathPrefix (NFD's own images link it as "/host-"). The
# tests link them as the relative "features.d/" and "host-" (host-sys, ...) and
# start nfd-worker in a per-test directory; nothing else is changed.
worker_ldflags="-X sigs.k8s.io/node-feature-discovery/source/local.featureFilesDir=features.d/"
worker_ldflags+=" -X sigs.k8s.io/node-feature-discovery/pkg/utils/hostpath.pathPrefix=host-"

if [ $# -gt 0 ]; then  # only the named targets
  chosen=()
  for want in "$@"; do
    found=""
    for t in "${targets[@]}"; do
      [ "${t%% *}" = "$want" ] && found="$t"
    done
    [ -n "$found" ] || { echo "build.sh: unknown target $want" >&2; exit 2; }
    chosen+=("$found")
  done
  targets=("${chosen[@]}")
fi

cd "$gomod"
# Stamp the versions the binaries report (as their own release builds do).
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
nfd_version="$(go list -m -f '{{.Version}}' sigs.k8s.io/node-feature-discovery)"
k8s_minor="${k8s_version#v*.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version"
k8s_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor"
nfd_ldflags="-X sigs.k8s.io/node-feature-discovery/pkg/version.version=$nfd_version"

for t in "${targets[@]}"; do
  name="${t%% *}"
  pkg="${t#* }"
  out="$bin/$name"
  if up_to_date "$out"; then
    echo "build.sh: $name up to date"
    continue
  fi
  echo "build.sh: building $name ($pkg)"
  start=$SECONDS
  # -trimpath keeps the cache key independent of the checkout path.
  case "$name" in
    kube-apiserver | kubectl) ldflags="$k8s_ldflags" ;;
    nfd-master) ldflags="$nfd_ldflags" ;;
    nfd-worker) ldflags="$nfd_ldflags $worker_ldflags" ;;
    *) ldflags="" ;;
  esac
  CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg"
  mv -f "$out.tmp" "$out"
  echo "build.sh: $name built in $((SECONDS - start))s"
done

# NFD's CRDs, from the same NFD module the binaries come from.
nfd_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/node-feature-discovery)"
install -m 0644 "$nfd_dir/deployment/base/nfd-crds/nfd-api-crds.yaml" "$bin/nfd-api-crds.yaml"
# NFD's own install manifests and Helm chart at that same version, for docs/install.md's
# NFD commands (tests/e2e/test_install_doc.py maps their remote references to this copy).
rm -rf "$bin/nfd-deployment"
cp -R "$nfd_dir/deployment" "$bin/nfd-deployment"
chmod -R u+w "$bin/nfd-deployment"
printf '%s\n' "$nfd_version" >"$bin/nfd-deployment/VERSION"

# The PodMonitor CRD (deploy/base/podmonitor.yaml), from the Prometheus
# Operator module (downloaded outside our module: it is data, not code).
promop=github.com/prometheus-operator/prometheus-operator@v0.85.0
if [ ! -e "$bin/podmonitor-crd.yaml" ]; then
  pdir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$promop" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  install -m 0644 "$pdir/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml" \
    "$bin/podmonitor-crd.yaml"
fi
echo "build.sh: done: $(ls "$bin" | tr '\n' ' ')"
