#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Stamps a release into a copy of the Helm chart: the chart's version and
# appVersion become the tag without its "v" (v1.2.3 -> 1.2.3), so the images the
# chart runs (image.tag and gpuAgent.image.tag default to appVersion) are the
# ones the release pushed; with REGISTRY set, image.repository and
# gpuAgent.image.repository move to $REGISTRY/<image>. The release workflow runs
# it on its checkout; test/helm's TestVerifyStampChart runs it on a temporary copy.
#   usage: [REGISTRY=ghcr.io/you] hack/stamp-chart.sh TAG CHART_DIR
# TAG must be a semantic version with a leading v (v1.2.3, v1.3.0-rc.1); the
# chart is left untouched when it is not.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: [REGISTRY=host/path] $0 TAG CHART_DIR" >&2
  exit 2
fi
tag="$1"
chart="$2"
registry="${REGISTRY:-}"
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
if [[ ! "$tag" =~ $semver ]]; then
  echo "stamp-chart: tag $tag is not a release tag vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]" >&2
  exit 1
fi
if [[ -n "$registry" && ! "$registry" =~ ^[a-z0-9.:-]+(/[a-z0-9._-]+)*$ ]]; then
  echo "stamp-chart: REGISTRY $registry is not an image repository prefix like ghcr.io/you" >&2
  exit 1
fi
version="${tag#v}"
chart_yaml="$chart/Chart.yaml"
values="$chart/values.yaml"
for f in "$chart_yaml" "$values"; do
  [[ -f "$f" ]] || { echo "stamp-chart: $f not found" >&2; exit 1; }
done

# Each line we rewrite must be there exactly once, or the chart's layout changed
# under this script and a silent half-stamp would follow.
expect_one() { # file regexp
  local n
  n=$(grep -cE "$2" "$1" || true)
  if [[ "$n" != 1 ]]; then
    echo "stamp-chart: expected one line matching '$2' in $1, found $n" >&2
    exit 1
  fi
}
expect_one "$chart_yaml" '^version:'
expect_one "$chart_yaml" '^appVersion:'
if [[ -n "$registry" ]]; then
  expect_one "$values" '^  repository: .*/inference-metrics-adapter$'
  expect_one "$values" '^    repository: .*/gpu-agent$'
fi

sed -i -E \
  -e "s|^version:.*|version: $version|" \
  -e "s|^appVersion:.*|appVersion: \"$version\"|" \
  "$chart_yaml"
if [[ -n "$registry" ]]; then
  sed -i -E \
    -e "s|^  repository: .*/inference-metrics-adapter$|  repository: $registry/inference-metrics-adapter|" \
    -e "s|^    repository: .*/gpu-agent$|    repository: $registry/gpu-agent|" \
    "$values"
fi
echo "stamp-chart: $chart is version $version (appVersion \"$version\")${registry:+, images from $registry}" >&2
