#!/usr/bin/env bash
# Builds the container images of the three binaries with docker (or podman,
# buildah... through $CONTAINER_TOOL). Images are built by your CI; this
# script is what it runs. Usage:
#   REGISTRY=ghcr.io/you TAG=0.1.0 hack/build-images.sh [--push]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tool="${CONTAINER_TOOL:-docker}"
registry="${REGISTRY:-ghcr.io/inference-metrics-adapter}"
tag="${TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/deploy/helm/inference-metrics-adapter/Chart.yaml")}"
push=0
[[ "${1:-}" == "--push" ]] && push=1
if ! command -v "$tool" >/dev/null 2>&1; then
  echo "build-images: $tool not found; set CONTAINER_TOOL or build the images in CI (deploy/docker/*.Dockerfile)" >&2
  exit 1
fi
for bin in inference-metrics-adapter gpu-agent inference-sim; do
  image="$registry/$bin:$tag"
  echo "build-images: $image" >&2
  "$tool" build -f "$root/deploy/docker/$bin.Dockerfile" -t "$image" "$root"
  if [[ $push == 1 ]]; then "$tool" push "$image"; fi
done
