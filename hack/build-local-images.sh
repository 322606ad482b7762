#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the three images from this repository alone, with no base image to
# pull: the binaries are built here by the Go toolchain, with the same
# settings as the tests' own builds (so that nothing is compiled twice), and
# copied into FROM-scratch images (no shell, no package manager) with the
# shared objects they link against (glibc, as ldd lists it; none for a
# static binary), copied from this machine. The adapter and the simulator
# run as 65532 (nonroot); the gpu-agent runs as root like the chart's
# DaemonSet (docs/gpu-agent.md).
#
# This is what the tests build and run (test/e2e images_test.go); the
# Dockerfiles in deploy/docker are the path for your CI (docker or podman
# with registry base images, multi-arch).
#
#   usage: hack/build-local-images.sh [IMAGE...]
#   env:   CONTAINER_TOOL (podman), TAG (local), IMAGE_PREFIX
#          (localhost/inference-metrics-adapter), IMAGE_WORKDIR (a temp dir)
# It prints one line per image: NAME SIZE_BYTES.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tool="${CONTAINER_TOOL:-podman}"
tag="${TAG:-local}"
prefix="${IMAGE_PREFIX:-localhost/inference-metrics-adapter}"
images=("$@")
[[ ${#images[@]} -gt 0 ]] || images=(inference-metrics-adapter gpu-agent inference-sim)

if ! command -v "$tool" >/dev/null 2>&1; then
  echo "build-local-images: $tool not found (Debian: apt-get install podman runc)" >&2
  exit 1
fi
work="${IMAGE_WORKDIR:-}"
if [[ -z $work ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi

# copy_libs BIN ROOTFS copies the shared objects BIN needs (ldd's list, the
# dynamic loader included) into ROOTFS at the same paths.
copy_libs() {
  local bin="$1" rootfs="$2" lib
  for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}

for name in "${images[@]}"; do
  case "$name" in
    inference-metrics-adapter | inference-sim) user=65532:65532 ;;
    gpu-agent) user=0:0 ;;
    *) echo "build-local-images: unknown image $name" >&2; exit 2 ;;
  esac
  ctx="$work/$name"
  rm -rf "$ctx"
  mkdir -p "$ctx/rootfs"
  echo "build-local-images: go build ./cmd/$name" >&2
  (cd "$root" && go build -ldflags "-s -w" -o "$ctx/rootfs/$name" "./cmd/$name")
  if ldd "$ctx/rootfs/$name" >/dev/null 2>&1; then
    copy_libs "$ctx/rootfs/$name" "$ctx/rootfs"
  fi
  # /tmp for the API server's self-signed fallback and the like.
  mkdir -p "$ctx/rootfs/tmp"
  chmod 1777 "$ctx/rootfs/tmp"
  cat >"$ctx/Containerfile" <<EOF
FROM scratch
COPY rootfs/ /
USER $user
ENTRYPOINT ["/$name"]
LABEL org.opencontainers.image.title="$name" \\
      org.opencontainers.image.source="https://github.com/inference-metrics-adapter/inference-metrics-adapter" \\
      org.opencontainers.image.licenses="Apache-2.0"
EOF
  image="$prefix/$name:$tag"
  echo "build-local-images: $tool build $image" >&2
  "$tool" build --quiet -t "$image" "$ctx" >/dev/null
  size=$("$tool" image inspect --format '{{.Size}}' "$image")
  echo "$image $size"
done
