#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the container images of the three binaries with docker (or podman,
# buildah... through $CONTAINER_TOOL). Images are built by your CI; this
# script is what it runs. Usage:
#   REGISTRY=ghcr.io/you TAG=0.1.0 hack/build-images.sh [--push]
# With PLATFORMS (e.g. linux/amd64,linux/arm64) each image is one multi-arch
# manifest: `docker buildx build --platform` (a buildx builder and, for other
# architectures, QEMU binfmt handlers must be set up, as the release workflow
# does) or `podman build --platform --manifest`. PUSH=1 is the same as --push.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tool="${CONTAINER_TOOL:-docker}"
registry="${REGISTRY:-ghcr.io/inference-metrics-adapter}"
tag="${TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/deploy/helm/inference-metrics-adapter/Chart.yaml")}"
platforms="${PLATFORMS:-}"
push="${PUSH:-0}"
[[ "${1:-}" == "--push" ]] && push=1
if ! command -v "$tool" >/dev/null 2>&1; then
  echo "build-images: $tool not found; set CONTAINER_TOOL or build the images in CI (deploy/docker/*.Dockerfile)" >&2
  exit 1
fi
for bin in inference-metrics-adapter gpu-agent inference-sim; do
  image="$registry/$bin:$tag"
  echo "build-images: $image${platforms:+ ($platforms)}" >&2
  if [[ -z "$platforms" ]]; then
    "$tool" build -f "$root/deploy/docker/$bin.Dockerfile" -t "$image" "$root"
    if [[ $push == 1 ]]; then "$tool" push "$image"; fi
  elif [[ "$(basename "$tool")" == podman ]]; then
    "$tool" manifest rm "$image" >/dev/null 2>&1 || true
    "$tool" build --platform "$platforms" --manifest "$image" -f "$root/deploy/docker/$bin.Dockerfile" "$root"
    if [[ $push == 1 ]]; then "$tool" manifest push --all "$image" "docker://$image"; fi
  else
    # Without --push a multi-arch build stays in the builder's cache: it checks
    # that every platform builds.
    push_flag=()
    if [[ $push == 1 ]]; then push_flag=(--push); fi
    "$tool" buildx build --platform "$platforms" "${push_flag[@]}" \
      -f "$root/deploy/docker/$bin.Dockerfile" -t "$image" "$root"
  fi
done
