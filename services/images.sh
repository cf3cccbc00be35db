#!/usr/bin/env bash
# Build both lecritique images with podman or docker (`make images`; docs/deployment.md, "Images").
#
#   IMAGE_VARIANT=cpu (default): builds without any container registry. The base is Debian bookworm
#     made here with debootstrap (python3.11, libseccomp2, and uv at /uv), imported once as
#     localhost/lecritique-base:bookworm and reused from the engine's image store on later runs;
#     torch is the CPU wheel found in pip's own find-links folders (or TORCH_WHEELS), copied into the
#     build context (requirements/wheels); no vLLM (tiny CPU experiments use the HF engine).
#   IMAGE_VARIANT=gpu: the Dockerfiles' defaults (CUDA base, vLLM), what a GPU cluster runs.
#
# Tags: $IMAGE_REGISTRY/services:$IMAGE_TAG and $IMAGE_REGISTRY/api:$IMAGE_TAG.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_REGISTRY=${IMAGE_REGISTRY:-ghcr.io/lecritique}
IMAGE_TAG=${IMAGE_TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' helm/lecritique/Chart.yaml)}
IMAGE_VARIANT=${IMAGE_VARIANT:-cpu}
BASE_IMAGE=${BASE_IMAGE:-localhost/lecritique-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The uv the GPU build copies from ghcr.io/astral-sh/uv (services/Dockerfile's UV_IMAGE), from PyPI.
UV_VERSION=$(sed -n 's|^ARG UV_IMAGE=ghcr.io/astral-sh/uv:||p' services/Dockerfile)
# python3-distutils provides python3.11-venv's virtual dependency python3.11-distutils, which
# debootstrap does not resolve by itself (the base then fails to configure).
BASE_PACKAGES=python3.11,python3.11-venv,python3-distutils,python3-lib2to3,python-is-python3,ca-certificates,libseccomp2

if [ -n "${CONTAINER_ENGINE:-}" ]; then ENGINE=$CONTAINER_ENGINE
elif command -v podman >/dev/null 2>&1; then ENGINE=podman
elif command -v docker >/dev/null 2>&1; then ENGINE=docker
else echo "make images needs podman or docker (make container-tools installs podman)" >&2; exit 1
fi
say() { echo "[images] $*" >&2; }

# The bookworm base: debootstrap (~1 min, ~70 MB of packages from the Debian mirror) and an
# import; skipped while the engine still holds the image.
make_base() {
  if $ENGINE image inspect "$BASE_IMAGE" >/dev/null 2>&1; then say "base $BASE_IMAGE: cached"; return; fi
  if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null 2>&1; then
    echo "making $BASE_IMAGE needs root and debootstrap (make container-tools), or set BASE_IMAGE" >&2; exit 1
  fi
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  say "base $BASE_IMAGE: debootstrap bookworm ($BASE_PACKAGES)"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$work/rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  python3 -m pip download --quiet --no-deps --only-binary=:all: "uv==$UV_VERSION" -d "$work/uv"
  python3 - "$work/uv" "$work/rootfs/uv" <<'PY'
import pathlib, sys, zipfile
[wheel] = pathlib.Path(sys.argv[1]).glob("uv-*.whl")
with zipfile.ZipFile(wheel) as archive:
    [name] = [n for n in archive.namelist() if n.endswith(".data/scripts/uv")]
    pathlib.Path(sys.argv[2]).write_bytes(archive.read(name))
PY
  chmod 755 "$work/rootfs/uv"
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* "$work"/rootfs/usr/share/doc/* "$work"/rootfs/usr/share/man/*
  # An imported root filesystem has no image config: without PATH, `ENV PATH=/opt/venv/bin:$PATH`
  # would leave the images without /usr/bin.
  tar -C "$work/rootfs" -c . \
    | $ENGINE import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE_IMAGE" >/dev/null
  say "base $BASE_IMAGE: imported"
}

# The CPU torch wheel in the build context, where the build can see it.
stage_torch_wheel() {
  local version; version=$(sed -n 's/^torch==//p' requirements/constraints.txt)
  local pattern="torch-${version}+cpu-cp311-cp311-*linux*_x86_64.whl"
  if compgen -G "requirements/wheels/$pattern" >/dev/null; then return; fi
  local dirs="${TORCH_WHEELS:-} ${PIP_FIND_LINKS:-} $(python3 -m pip config get global.find-links 2>/dev/null || true)"
  for dir in $dirs; do
    dir=${dir#file://}
    for wheel in "$dir"/$pattern; do
      if [ -f "$wheel" ]; then
        ln -f "$wheel" requirements/wheels/ 2>/dev/null || cp "$wheel" requirements/wheels/
        say "torch: $(basename "$wheel") from $dir"; return
      fi
    done
  done
  echo "no $pattern in TORCH_WHEELS or pip's find-links ($dirs): put the CPU torch wheel in requirements/wheels" >&2
  exit 1
}

services_args=() api_args=()
# A TLS proxy that re-signs PyPI: the CA bundle pip here uses (PIP_CERT, pip's global.cert or
# SSL_CERT_FILE) goes to the builds as the `ca-bundle` secret, never into a layer.
CA_BUNDLE=${CA_BUNDLE:-${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}}
CA_BUNDLE=${CA_BUNDLE:-${SSL_CERT_FILE:-}}
if [ -n "$CA_BUNDLE" ] && [ -f "$CA_BUNDLE" ]; then
  services_args+=(--secret "id=ca-bundle,src=$CA_BUNDLE"); api_args+=(--secret "id=ca-bundle,src=$CA_BUNDLE")
fi
if [ "$IMAGE_VARIANT" = cpu ]; then
  make_base
  stage_torch_wheel
  services_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "UV_IMAGE=$BASE_IMAGE"
                 --build-arg PYTHON=/usr/bin/python3.11 --build-arg VLLM= --build-arg "EXTRAS=${IMAGE_EXTRAS:-}"
                 --build-arg "BUILD_PACKAGES=gcc libc6-dev python3.11-dev")
  api_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "BUILD_PACKAGES=gcc libc6-dev python3.11-dev")
elif [ "$IMAGE_VARIANT" != gpu ]; then
  echo "IMAGE_VARIANT must be cpu or gpu, not $IMAGE_VARIANT" >&2; exit 1
fi
# What an image is built from (every file its build reads, the local wheels' names, the base, the
# build arguments), as a label: an image whose label matches is current and is not rebuilt
# (IMAGE_FORCE=1 rebuilds). A build whose every layer is cached still checksums each COPY, and
# copying /opt/venv (1.5 GB) from the build stage took minutes just to find its cached layer.
sources() {
  find libs services pyproject.toml README.md requirements/constraints.txt -type f \
    ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
  ls requirements/wheels
  $ENGINE image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || true
}
build() {  # build IMAGE DOCKERFILE BUILD-ARGS...
  local image=$1 dockerfile=$2; shift 2
  local digest label
  digest=$({ sources; printf '%s\n' "$dockerfile" "$@"; } | sha256sum | cut -c1-16)
  label=$($ENGINE image inspect --format '{{index .Labels "dev.lecritique.source"}}' "$image" 2>/dev/null || true)
  if [ "${IMAGE_FORCE:-0}" != 1 ] && [ "$label" = "$digest" ]; then
    say "$image: current (sources $digest)"; return
  fi
  say "$ENGINE build $image ($IMAGE_VARIANT)"
  local previous
  previous=$($ENGINE image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  $ENGINE build -f "$dockerfile" "$@" --label "dev.lecritique.source=$digest" -t "$image" .
  # The image this build replaced keeps its gigabytes as an untagged image: every rebuild would grow
  # the store (106 GB after a day of rebuilds). Remove it unless a container still uses it or another
  # tag still names it; the build cache's layers stay, so the next build is as fast.
  if [ -n "$previous" ] && [ "$previous" != "$($ENGINE image inspect --format '{{.Id}}' "$image")" ] \
     && [ -z "$($ENGINE image inspect --format '{{range .RepoTags}}{{.}} {{end}}' "$previous" 2>/dev/null | tr -d ' ')" ]; then
    $ENGINE rmi "$previous" >/dev/null 2>&1 && say "$image: removed the image it replaced (${previous:0:12})" || true
  fi
}
build "$IMAGE_REGISTRY/services:$IMAGE_TAG" services/Dockerfile "${services_args[@]}"
build "$IMAGE_REGISTRY/api:$IMAGE_TAG" services/api/Dockerfile "${api_args[@]}"
