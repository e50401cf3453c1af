#!/usr/bin/env bash
# Regenerate the image's dependency locks (exact versions + sha256 of every file PyPI
# serves for them, all platforms): image/requirements.lock (runtime, from pyproject.toml
# with the [kubernetes] extra) and image/build.lock (setuptools/wheel that build
# nfd-gpu's own wheel). The Dockerfile
# installs both with `pip install --require-hashes`. Needs network access to PyPI.
#   bash scripts/lock-image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q uv
uv="$tmp/venv/bin/uv"
"$uv" pip compile pyproject.toml --extra kubernetes --python-version 3.12 --universal \
  --generate-hashes \
  --no-header -q -o image/requirements.lock
printf 'setuptools>=68\nwheel\n' > "$tmp/build.in"
"$uv" pip compile "$tmp/build.in" --python-version 3.12 --universal --generate-hashes \
  --no-header -q -o image/build.lock
sed -i "s|$tmp/build.in|image/build.in|" image/build.lock
echo "image/requirements.lock and image/build.lock updated"
