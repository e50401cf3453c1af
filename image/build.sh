#!/usr/bin/env bash
# Build the nfd-gpu image without a container engine (docs/image.md):
#
#   1. a minimal Debian bookworm root filesystem (debootstrap --variant=minbase) with
#      python3, libudev1 (pyudev) and libdrm-amdgpu1 (AMD);
#   2. the nfd-gpu wheel and its locked dependencies (image/requirements-<arch>.txt,
#      sha256-pinned, from PyPI) installed by pip run from its wheel inside the root
#      filesystem: pip itself is not installed, no compiler is ever present;
#   3. a non-root user (65532), the shipped rules, /host (as the Dockerfile);
#   4. docs, caches, logs and timestamps removed or fixed; byte-compiled with hash-based
#      .pyc files (valid whatever the mtimes);
#   5. written as a one-layer OCI image (image/oci.py): build/image/nfd-gpu-<version>-linux-
#      <arch>.oci.tar (skopeo's oci-archive:) and the .oci/ layout directory beside it.
#
# Reproducible: the same Debian packages (cached below), the same lock file and the same
# commit (SOURCE_DATE_EPOCH = its commit time) give a byte-identical image.
#
# Needs root (chroot), debootstrap, tar, gzip, python3 with pip; skopeo to check the
# result when installed.  Environment:
#   ARCH          image architecture (default: this machine's; another one needs
#                 binfmt_misc emulation, see docs/image.md)
#   CACHE         download cache (default .cache/image, git-ignored)
#   OUT           output directory (default build/image)
#   MIRROR        Debian mirror (default http://deb.debian.org/debian)
#   SOURCE_DATE_EPOCH  image timestamps (default: the HEAD commit time)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
t_start=$(date +%s)

SUITE=bookworm
DEBS=python3,libudev1,libdrm-amdgpu1
HOST_ARCH=$(dpkg --print-architecture)
ARCH=${ARCH:-$HOST_ARCH}
CACHE=${CACHE:-$REPO/.cache/image}
OUT=${OUT:-$REPO/build/image}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-python3}
UID_GID=65532
IMAGE_PY=python3.11 # bookworm's python3
# Packages minbase brings that nfd-gpu does not run (step 4 purges them; dash and dpkg go
# last, by image/purge.py): util-linux-extra is purged first, its script needs util-linux.
PURGE=(apt libapt-pkg6.0 adduser debconf login passwd mount libpam-modules-bin gpgv
  debian-archive-keyring e2fsprogs init-system-helpers util-linux bash perl-base)

die() { echo "image/build.sh: error: $*" >&2; exit 1; }
step() { echo "== $* ($(($(date +%s) - t_start)) s)"; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "debootstrap not installed (apt-get install debootstrap)"
case $ARCH in
  amd64) MACHINE=x86_64 ;;
  arm64) MACHINE=aarch64 ;;
  *) die "ARCH=$ARCH: expected amd64 or arm64" ;;
esac
if [ "$ARCH" != "$HOST_ARCH" ] && [ ! -e "/proc/sys/fs/binfmt_misc/qemu-$MACHINE" ]; then
  die "ARCH=$ARCH on a $HOST_ARCH machine needs qemu-user-static registered in binfmt_misc:" \
    "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc;" \
    "apt-get install qemu-user-static binfmt-support (docs/image.md), or an $ARCH machine"
fi
LOCK=$REPO/image/requirements-$ARCH.txt
[ -f "$LOCK" ] || die "$LOCK: no such file (python3 image/lock.py)"

VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' nfd_gpu/__init__.py)
[ -n "$VERSION" ] || die "nfd_gpu/__init__.py: no __version__ line"
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  REVISION="$REVISION-dirty"
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
NAME=nfd-gpu-$VERSION-linux-$ARCH

mkdir -p "$CACHE" "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nfd-gpu-image.XXXXXX")
ROOTFS=$WORK/rootfs
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# -- 1. Debian root filesystem -----------------------------------------------------------
# Cached in two steps: the .debs (debootstrap --make-tarball) and the configured root
# filesystem as a tar. Delete .cache/image to pick up Debian updates.
key=$(printf '%s\n' "$SUITE" "$ARCH" "$DEBS" "$MIRROR" | sha256sum | cut -c1-16)
DEBS_TGZ=$CACHE/debs-$SUITE-$ARCH-$key.tgz
BASE_TAR=$CACHE/rootfs-$SUITE-$ARCH-$key.tar
if [ ! -f "$BASE_TAR" ]; then
  if [ ! -f "$DEBS_TGZ" ]; then
    step "debootstrap: downloading $SUITE $ARCH packages"
    debootstrap --arch="$ARCH" --variant=minbase --include="$DEBS" \
      --make-tarball="$DEBS_TGZ.part" "$SUITE" "$WORK/dl" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log"; die "debootstrap --make-tarball failed"; }
    mv "$DEBS_TGZ.part" "$DEBS_TGZ"
  fi
  step "debootstrap: installing $SUITE minbase + $DEBS"
  debootstrap --arch="$ARCH" --variant=minbase --include="$DEBS" \
    --unpack-tarball="$DEBS_TGZ" "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; die "debootstrap failed"; }
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb
  tar --create --file "$BASE_TAR.part" --directory "$ROOTFS" --numeric-owner .
  mv "$BASE_TAR.part" "$BASE_TAR"
else
  step "root filesystem from cache $(basename "$BASE_TAR")"
  mkdir -p "$ROOTFS"
  tar --extract --file "$BASE_TAR" --directory "$ROOTFS" --numeric-owner
fi

# -- 2. Python packages --------------------------------------------------------------------
step "wheels: nfd-gpu $VERSION + $(grep -c '^[a-z]' "$LOCK") locked dependencies"
WHEELS=$CACHE/wheels-$ARCH
mkdir -p "$WHEELS" "$CACHE/installer"
PY_TAGS=(--python-version 3.11 --implementation cp --abi cp311)
PLATFORMS=()
for tag in manylinux2014 manylinux_2_28 manylinux_2_34; do
  PLATFORMS+=(--platform "${tag}_$MACHINE")
done
"$PYTHON" -m pip download -q --no-deps --require-hashes --only-binary=:all: \
  "${PY_TAGS[@]}" "${PLATFORMS[@]}" --dest "$WHEELS" -r "$LOCK"
"$PYTHON" -m pip download -q --no-deps --require-hashes --only-binary=:all: \
  --dest "$CACHE/installer" -r image/requirements-installer.txt
# The project's wheel (pure Python), built from this checkout.
rm -rf "$WORK/project"
isolation=()
if "$PYTHON" -c 'import setuptools, wheel' 2>/dev/null; then isolation=(--no-build-isolation); fi
"$PYTHON" -m pip wheel -q --no-deps "${isolation[@]}" --wheel-dir "$WORK/project" . >/dev/null
mkdir -p "$ROOTFS/tmp/wheels"
# Exactly the locked files (the cache may hold older versions).
grep -o '^[a-z0-9-]*==[^ ]*' "$LOCK" | while IFS='=' read -r name _ version; do
  pat=$(echo "$name" | tr '-' '_')
  found=$(find "$WHEELS" -maxdepth 1 -iname "${pat}-${version}-*.whl" | sort | head -1)
  [ -n "$found" ] || die "$name==$version: no wheel in $WHEELS"
  cp "$found" "$ROOTFS/tmp/wheels/"
done
cp "$WORK"/project/nfd_gpu-*.whl "$ROOTFS/tmp/wheels/"
PIP_WHL=$(find "$CACHE/installer" -maxdepth 1 -name 'pip-*.whl' | sort | tail -1)
cp "$PIP_WHL" "$ROOTFS/tmp/pip.whl"

step "installing into the root filesystem (the locked pip, run by the host for $ARCH)"
in_root() {
  chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LC_ALL=C.UTF-8 \
    SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" PYTHONHASHSEED=0 "$@"
}
# The locked pip (from its wheel) runs on the HOST, for the image's interpreter and
# platform: no emulation for another architecture (the arm64 image on an amd64 machine
# ran pip under qemu: minutes). Wheels are only unpacked (no build, no compile here), into
# the image's /usr/local dist-packages, beside (not over) Debian's packages. By name from
# the wheel directory (--find-links): no PEP 610 direct_url.json naming a build path.
site_dir=$ROOTFS/usr/local/lib/$IMAGE_PY/dist-packages
reqs=("nfd-gpu==$VERSION")
while IFS='=' read -r name _ version; do reqs+=("$name==$version"); done \
  < <(grep -o '^[a-z0-9-]*==[^ ]*' "$LOCK")
mkdir -p "$site_dir" "$ROOTFS/usr/local/bin"
env -i PATH="$PATH" HOME="$WORK" LC_ALL=C.UTF-8 SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
  "$PYTHON" "$ROOTFS/tmp/pip.whl/pip" install --quiet --no-index --no-deps --no-cache-dir \
  --no-compile --disable-pip-version-check --root-user-action=ignore \
  --find-links "$ROOTFS/tmp/wheels" \
  --only-binary=:all: "${PY_TAGS[@]}" "${PLATFORMS[@]}" --target "$site_dir" "${reqs[@]}"
# Console scripts: to /usr/local/bin, for the image's python3 (pip wrote the host's).
for script in "$site_dir"/bin/*; do
  sed -i "1s|^#!.*python.*$|#!/usr/bin/python3|" "$script"
  mv "$script" "$ROOTFS/usr/local/bin/"
done
rmdir "$site_dir/bin"
rm -rf "$ROOTFS/tmp/wheels" "$ROOTFS/tmp/pip.whl"

# -- 3. nfd-gpu files and user -------------------------------------------------------------
step "user $UID_GID, rules"
# /host: where deploy/ mounts the host paths the scan reads (--root /host); pci.ids is the
# host's, below its mounted /usr (docs/install.md "What the pod reads").
mkdir -p "$ROOTFS/usr/share/nfd-gpu/rules" "$ROOTFS/host"
install -m 0644 rules/*.yaml "$ROOTFS/usr/share/nfd-gpu/rules/"
days=$((SOURCE_DATE_EPOCH / 86400))
echo "nfd-gpu:x:$UID_GID:$UID_GID:nfd-gpu:/nonexistent:/usr/sbin/nologin" >>"$ROOTFS/etc/passwd"
echo "nfd-gpu:x:$UID_GID:" >>"$ROOTFS/etc/group"
echo "nfd-gpu:!:$days::::::" >>"$ROOTFS/etc/shadow"
echo "nfd-gpu:!::" >>"$ROOTFS/etc/gshadow"
# Password-change dates written by debootstrap are "today": fix them to the epoch.
sed -i -E "s/^([^:]*:[^:]*:)[0-9]+:/\1$days:/" "$ROOTFS/etc/shadow"

# -- 4. trim and fix what would differ between builds --------------------------------------
# Least privilege (docs/image.md "What the image holds"): nfd-gpu runs python3 and never a
# shell or a package manager. Purged with dpkg (their maintainer scripts run; the status
# database stays true for vulnerability scanners): the setuid/setgid programs (login,
# passwd, mount, util-linux's su, libpam-modules-bin's unix_chkpwd), apt and its keys,
# bash, perl and the perl-based tools (adduser, debconf, init-system-helpers), e2fsprogs.
# Then dash (/bin/sh) and dpkg itself, which dpkg's scripts need, by image/purge.py.
step "purging shells, package managers and setuid programs"
purge() {
  in_root /usr/bin/env PATH=/usr/sbin:/usr/bin dpkg --purge --force-remove-essential \
    --force-depends "$@" >>"$WORK/purge.log" 2>&1 \
    || { tail -20 "$WORK/purge.log"; die "dpkg --purge $* failed"; }
}
purge util-linux-extra
purge "${PURGE[@]}"
"$PYTHON" image/purge.py "$ROOTFS" dash dpkg
setid=$(find "$ROOTFS" -xdev -type f -perm /6000)
[ -z "$setid" ] || die "setuid/setgid files left in the image: $setid"

step "trimming"
r=$ROOTFS
find "$r/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$r"/usr/share/{man,info,locale,lintian,linda}/* "$r"/var/lib/apt/lists/* \
  "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/partial/* "$r"/var/cache/debconf/*-old \
  "$r"/var/lib/dpkg/*-old "$r"/var/cache/ldconfig/aux-cache "$r"/root/.cache "$r"/tmp/* \
  "$r"/var/tmp/* "$r"/dev/* "$r"/etc/machine-id "$r"/var/lib/dbus/machine-id
find "$r/var/log" -type f -delete
# kubernetes/aio is the asyncio copy of the client (~68 MB with its models), never imported
# by nfd-gpu; *_test.py are the package's own tests.
site=$r/usr/local/lib/$IMAGE_PY/dist-packages
rm -rf "$site/kubernetes/aio"
find "$site/kubernetes" -name '*_test.py' -delete
: >"$r/etc/resolv.conf"
echo nfd-gpu >"$r/etc/hostname"
# Hash-based .pyc (PEP 552): valid although every mtime is reset in the layer.
find "$r/usr" -name __pycache__ -type d -prune -exec rm -rf {} +
py_dirs=(/usr/lib/$IMAGE_PY /usr/lib/python3/dist-packages /usr/local/lib/$IMAGE_PY/dist-packages)
host_py=$("$PYTHON" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
if [ "$ARCH" != "$HOST_ARCH" ] && [ "$host_py" = "$IMAGE_PY" ]; then
  # Another architecture: .pyc files do not depend on it, and the host's Python of the
  # same minor version writes the same format (magic number): compiled here, not under
  # emulation, with the paths the image's interpreter sees (-s/-p).
  "$PYTHON" -m compileall -q -j0 --invalidation-mode checked-hash -s "$r" -p / \
    "${py_dirs[@]/#/$r}" >/dev/null
else
  in_root /usr/bin/python3 -m compileall -q -j1 --invalidation-mode checked-hash \
    "${py_dirs[@]}" >/dev/null
fi
for banned in pip pip3 gcc cc make sh bash dash apt apt-get dpkg perl su mount; do
  [ ! -e "$r/usr/bin/$banned" ] && [ ! -e "$r/usr/local/bin/$banned" ] \
    || die "$banned found in the image"
done

# -- 5. OCI image ------------------------------------------------------------------------
step "writing the OCI image"
rootfs_mb=$(du -sm "$ROOTFS" | cut -f1)
labels=(
  "org.opencontainers.image.title=nfd-gpu"
  "org.opencontainers.image.description=GPU feature discovery for Kubernetes Node Feature Discovery"
  "org.opencontainers.image.version=$VERSION"
  "org.opencontainers.image.revision=$REVISION"
  "org.opencontainers.image.created=$CREATED"
  "org.opencontainers.image.licenses=Apache-2.0"
  "org.opencontainers.image.source=https://github.com/nfd-gpu/nfd-gpu"
  "org.opencontainers.image.url=https://github.com/nfd-gpu/nfd-gpu"
  "org.opencontainers.image.documentation=https://github.com/nfd-gpu/nfd-gpu/blob/main/docs/image.md"
  "org.opencontainers.image.vendor=nfd-gpu"
  "org.opencontainers.image.base.name=debian:$SUITE (debootstrap minbase)"
)
label_args=()
for l in "${labels[@]}"; do label_args+=(--label "$l"); done
"$PYTHON" image/oci.py --rootfs "$ROOTFS" --out "$OUT/$NAME" --arch "$ARCH" \
  --epoch "$SOURCE_DATE_EPOCH" --tag "$VERSION" --user "$UID_GID:$UID_GID" \
  --entrypoint nfd-gpu --entrypoint run \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env PYTHONUNBUFFERED=1 --env PYTHONDONTWRITEBYTECODE=1 --port 8081/tcp \
  --created-by "image/build.sh: debootstrap $SUITE minbase + $DEBS, nfd-gpu $VERSION wheel" \
  "${label_args[@]}" >"$OUT/$NAME.json"

archive=$OUT/$NAME.oci.tar
if command -v skopeo >/dev/null; then
  skopeo inspect "oci-archive:$archive" >"$OUT/$NAME.inspect.json"
fi
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
layer_bytes=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["layer_bytes"])' \
  "$OUT/$NAME.json")
manifest=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifest"])' \
  "$OUT/$NAME.json")
step "SBOM (SPDX 2.3: the locked wheels and the Debian packages installed)"
"$PYTHON" image/sbom.py "$ROOTFS" "$LOCK" "$ARCH" "$VERSION" "$REVISION" "$OUT/$NAME.spdx.json"
step "done"
echo "image:    $archive"
echo "manifest: $manifest"
echo "size:     $(mb "$layer_bytes") MB compressed (pull), ${rootfs_mb} MB unpacked"
# The multi-arch image (one OCI index, RELEASING.md) once both architectures of this
# version are built; image/index.py refuses layouts of different revisions.
layouts=()
for a in amd64 arm64; do
  [ -d "$OUT/nfd-gpu-$VERSION-linux-$a.oci" ] && layouts+=("$OUT/nfd-gpu-$VERSION-linux-$a.oci")
done
if [ "${#layouts[@]}" = 2 ]; then
  "$PYTHON" image/index.py "$OUT/nfd-gpu-$VERSION" "${layouts[@]}" --tag "$VERSION" \
    --epoch "$SOURCE_DATE_EPOCH" || echo "image/build.sh: no multi-arch index (see above)" >&2
fi
