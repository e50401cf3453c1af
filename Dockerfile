# nfd-gpu agent image. Build: docker build -t nfd-gpu:dev .
# Runs `nfd-gpu run`; deploy/ passes --root /host with the host paths the scan reads
# mounted read-only under /host (docs/install.md "What the pod reads").

# -- build the wheel (build tools stay in this stage) --------------------------------------
FROM python:3.12-slim AS build
WORKDIR /src
# README.m[d]: copied when present (pyproject names it as the long description)
COPY pyproject.toml README.m[d] ./
COPY nfd_gpu ./nfd_gpu
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# -- runtime ------------------------------------------------------------------------------
FROM python:3.12-slim
# pci.ids is read below --root: deploy/ mounts the host's /usr, so the host's copy is used
# (as by `nfd-gpu scan` on the host). libudev1: pyudev (udev rescans); libdrm-amdgpu1: AMD.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libudev1 libdrm-amdgpu1 \
 && rm -rf /var/lib/apt/lists/*
# The NodeFeatureRules nfd-gpu ships (rules/, see docs/rules.md); deploy/ passes
# --rules=/usr/share/nfd-gpu/rules so e.g. intel.datacenter labels appear.
COPY rules/*.yaml /usr/share/nfd-gpu/rules/
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl && rm -rf /wheels
# Non-root by default (uid matches deploy/base); the sidecar overlay runs as uid 0 to
# write the host's root-owned features.d.
RUN groupadd --gid 65532 nfd-gpu && useradd --uid 65532 --gid 65532 --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin nfd-gpu
USER 65532:65532
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8081
ENTRYPOINT ["nfd-gpu", "run"]
