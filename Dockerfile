# nfd-gpu agent image. Build: docker build -t nfd-gpu:dev .
# Runs `nfd-gpu run`; deploy/ passes --root /host with the host paths the scan reads
# mounted read-only under /host (docs/install.md "What the pod reads").

# The base image is pinned by digest (python:3.12-slim). Refresh the digest with
# `docker buildx imagetools inspect python:3.12-slim` (or Renovate) and set both FROMs.
# Every Python package is installed from image/*.lock with --require-hashes
# (image/lock.py, the one locker: tests/test_locks.py checks them against pyproject.toml).

# -- build: a virtual environment with the locked dependencies and nfd-gpu -----------------
FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea AS build
WORKDIR /src
COPY image/requirements.lock image/build.lock ./
RUN python -m venv /opt/nfd-gpu \
 && /opt/nfd-gpu/bin/pip install --no-cache-dir --require-hashes -r requirements.lock \
 && python -m pip install --no-cache-dir --require-hashes -r build.lock
# README.m[d]: copied when present (pyproject names it as the long description)
COPY pyproject.toml README.m[d] ./
COPY nfd_gpu ./nfd_gpu
# nfd-gpu's own wheel, built with the locked setuptools (no unpinned download), then
# installed without dependencies (all are in the lock); pip leaves the venv. Byte-compiled
# with hash-based .pyc files (valid whatever the mtimes, as image/build.sh's): the runtime
# sets PYTHONDONTWRITEBYTECODE, so a module without its .pyc is compiled at every start
# (nfd_gpu's: +39 ms CPU for a `scan`, measured; more for the agent, which imports more)
RUN python -m pip wheel --no-cache-dir --no-build-isolation --no-deps --wheel-dir /wheels . \
 && /opt/nfd-gpu/bin/pip install --no-cache-dir --no-deps --no-compile /wheels/*.whl \
 && /opt/nfd-gpu/bin/pip uninstall -y pip \
 && /opt/nfd-gpu/bin/python -m compileall -q --invalidation-mode checked-hash /opt/nfd-gpu/lib

# -- runtime: no pip, no build tools --------------------------------------------------------
FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea
# pci.ids is read below --root: deploy/ mounts the host's /usr, so the host's copy is used
# (as by `nfd-gpu scan` on the host). libudev1: pyudev (udev rescans); libdrm-amdgpu1: AMD.
# Debian packages come from the signed Debian archive; pip leaves the image.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libudev1 libdrm-amdgpu1 \
 && rm -rf /var/lib/apt/lists/* \
 && python -m pip uninstall -y pip \
 && rm -f /usr/local/bin/pip /usr/local/bin/pip3*
# The NodeFeatureRules nfd-gpu ships (rules/, see docs/rules.md); deploy/ passes
# --rules=/usr/share/nfd-gpu/rules so e.g. intel.datacenter labels appear.
COPY rules/*.yaml /usr/share/nfd-gpu/rules/
COPY --from=build /opt/nfd-gpu /opt/nfd-gpu
ENV PATH=/opt/nfd-gpu/bin:$PATH
# Non-root (uid matches deploy/; the sidecar overlay's init container alone runs as uid 0
# with CAP_CHOWN to hand the host's features.d to gid 65532).
RUN groupadd --gid 65532 nfd-gpu && useradd --uid 65532 --gid 65532 --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin nfd-gpu
USER 65532:65532
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8081
ENTRYPOINT ["nfd-gpu", "run"]
