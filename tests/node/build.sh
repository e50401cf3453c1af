#!/usr/bin/env bash
# Build the real node's Kubernetes components into tests/node/bin/ (git-ignored) from
# the Go module in tests/node/go: kubelet, kube-controller-manager, kube-scheduler
# (k8s.io/kubernetes), and the pause image (build/pause/linux/pause.c of that same
# module, static, as an OCI archive tagged registry.k8s.io/pause:<version>).
#
# Idempotent and cached like tests/e2e/build.sh: a binary is rebuilt only when it is
# older than go.mod/go.sum or this script; Go's module and build caches make a
# rebuild cheap. The kubelet is the long pole of a cold CI run (~11-15 min on 2 cores).
#
# Usage: bash tests/node/build.sh [TARGET...]   (default: every target; pause = the image)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gomod="$here/go"
bin="$here/bin"
mkdir -p "$bin"
command -v go >/dev/null || { echo "node/build.sh: go not found on PATH (Go >= 1.26 needed)" >&2; exit 1; }

all=(kubelet kube-controller-manager kube-scheduler kube-apiserver pause)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")

up_to_date() {  # $1 = output; true when it is newer than every input (and this script)
  [ -e "$1" ] || return 1
  [ -z "$(find "$gomod" "$here/build.sh" -type f -newer "$1" -print -quit)" ]
}

cd "$gomod"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
k8s_minor="${k8s_version#v*.}"; k8s_minor="${k8s_minor%%.*}"
ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor"

pause_image() {  # the pause binary in a one-layer OCI archive, as the kubelet's default names it
  local src tag dir layer cfg man idx
  src="$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c"
  tag="$(sed -n 's/.*PauseVersion = "\(.*\)"/\1/p' "$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/cmd/kubeadm/app/constants/constants.go")"
  [ -n "$tag" ] || { echo "node/build.sh: no PauseVersion in kubeadm's constants.go" >&2; exit 1; }
  dir="$(mktemp -d)"
  mkdir -p "$dir/root" "$dir/oci/blobs/sha256"
  gcc -Os -static -DVERSION="\"$tag\"" -o "$dir/root/pause" "$src"
  strip "$dir/root/pause"
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$dir/root" -cf "$dir/layer.tar" pause
  layer="$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)"
  mv "$dir/layer.tar" "$dir/oci/blobs/sha256/$layer"
  printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$(go env GOARCH)" "$layer" >"$dir/cfg.json"
  cfg="$(sha256sum "$dir/cfg.json" | cut -d' ' -f1)"
  mv "$dir/cfg.json" "$dir/oci/blobs/sha256/$cfg"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
    "$cfg" "$(stat -c %s "$dir/oci/blobs/sha256/$cfg")" "$layer" "$(stat -c %s "$dir/oci/blobs/sha256/$layer")" >"$dir/man.json"
  man="$(sha256sum "$dir/man.json" | cut -d' ' -f1)"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"registry.k8s.io/pause:%s"}}]}' \
    "$man" "$(stat -c %s "$dir/man.json")" "$tag" >"$dir/oci/index.json"
  mv "$dir/man.json" "$dir/oci/blobs/sha256/$man"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci/oci-layout"
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$dir/oci" -cf "$bin/pause.oci.tar.tmp" .
  mv -f "$bin/pause.oci.tar.tmp" "$bin/pause.oci.tar"
  printf '%s\n' "registry.k8s.io/pause:$tag" >"$bin/pause.tag"
  rm -rf "$dir"
}

for name in "${want[@]}"; do
  case "$name" in
    pause) out="$bin/pause.oci.tar" ;;
    kubelet | kube-controller-manager | kube-scheduler | kube-apiserver) out="$bin/$name" ;;
    *) echo "node/build.sh: unknown target $name" >&2; exit 2 ;;
  esac
  if up_to_date "$out"; then
    echo "node/build.sh: $name up to date"
    continue
  fi
  echo "node/build.sh: building $name ($k8s_version)"
  start=$SECONDS
  if [ "$name" = pause ]; then
    pause_image
  else
    # -trimpath keeps the cache key independent of the checkout path.
    CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp" "k8s.io/kubernetes/cmd/$name"
    mv -f "$out.tmp" "$out"
  fi
  echo "node/build.sh: $name built in $((SECONDS - start))s"
done
echo "node/build.sh: done: $(ls "$bin" | tr '\n' ' ')"
