#!/usr/bin/env bash
# Build the deployment tools the tests use into tests/e2e/bin/ (git-ignored), from their
# Go modules through the Go module proxy: helm (helm.sh/helm/v3), helm4 (helm.sh/helm/v4: the
# chart is tested with both majors) and kustomize
# (sigs.k8s.io/kustomize/kustomize/v5). Separate from tests/e2e/go's module (these are
# plain `go install`s at pinned versions).
#
# Cached: a tool is rebuilt only when its binary is missing or reports another version;
# Go's module and build caches make a rebuild cheap. tests/deploy fails (CI set) or skips
# (locally) when a tool is missing.
#
# Usage: bash tests/e2e/build-tools.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
mkdir -p "$bin"
command -v go >/dev/null || { echo "build-tools.sh: go not found on PATH (Go >= 1.24 needed)" >&2; exit 1; }

HELM_VERSION=v3.19.5
HELM4_VERSION=v4.3.1
KUSTOMIZE_VERSION=v5.8.1

build() {  # $1 name, $2 module@version, $3 version string the binary must print, $4 ldflags,
  # $5 the name installed as (default: $1)
  local name="$1" pkg="$2" want="$3" ldflags="$4" out="$bin/${5:-$1}"
  local stamp="$pkg $ldflags"
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ] &&
    "$out" version 2>/dev/null | grep -qF "$want"; then
    echo "build-tools.sh: ${5:-$name} $want up to date"
    return
  fi
  echo "build-tools.sh: building ${5:-$name} ($pkg)"
  local start=$SECONDS tmp
  tmp="$(mktemp -d)"
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "$ldflags" "$pkg"
  mv -f "$tmp/$name" "$out"
  rmdir "$tmp"
  "$out" version 2>/dev/null | grep -qF "$want" || { echo "build-tools.sh: $out does not report $want" >&2; exit 1; }
  printf '%s\n' "$stamp" >"$out.stamp"
  echo "build-tools.sh: ${5:-$name} built in $((SECONDS - start))s"
}

# The ldflags of helm's Makefile: its version, and the Kubernetes version `helm template`
# and `helm lint` assume (client-go's minor + 1.x: v0.34 in helm v3.19.5's go.mod; the
# default without them is 1.20, older than the chart's kubeVersion).
helm_k8s="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34"
helm_k8s+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=34"
build helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$HELM_VERSION" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION $helm_k8s"
# Helm 4 takes the Kubernetes version it assumes from its client-go module's version (no
# ldflags for it); only its own version is set, as its Makefile does.
build helm "helm.sh/helm/v4/cmd/helm@$HELM4_VERSION" "$HELM4_VERSION" \
  "-X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION" helm4
build kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" "$KUSTOMIZE_VERSION" \
  "-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$KUSTOMIZE_VERSION"

# The Prometheus Operator CRDs the chart's monitoring objects use (PodMonitor,
# ServiceMonitor, PrometheusRule), from its Go module (data, downloaded outside any module
# of ours), for the server-side dry-run in tests/e2e/test_deploy_dry_run.py.
promop=github.com/prometheus-operator/prometheus-operator@v0.85.0
if [ ! -s "$bin/monitoring-crds.yaml" ]; then
  pdir="$(cd / && GOFLAGS=-mod=mod go mod download -json "$promop" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [ -n "$pdir" ] || { echo "build-tools.sh: could not download $promop" >&2; exit 1; }
  crds="$pdir/example/prometheus-operator-crd"
  { cat "$crds/monitoring.coreos.com_podmonitors.yaml"; echo "---"
    cat "$crds/monitoring.coreos.com_servicemonitors.yaml"; echo "---"
    cat "$crds/monitoring.coreos.com_prometheusrules.yaml"; } >"$bin/monitoring-crds.yaml.tmp"
  mv -f "$bin/monitoring-crds.yaml.tmp" "$bin/monitoring-crds.yaml"
  echo "build-tools.sh: monitoring-crds.yaml from $promop"
fi
