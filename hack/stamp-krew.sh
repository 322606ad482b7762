#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Prints plugins/krew/inference.yaml with its placeholders filled in for a
# release: VERSION becomes TAG, each SHA256_<OS>_<ARCH> the sha256 of
# kubectl-inference-TAG-<os>-<arch>.tar.gz read from SHA256SUMS (as written by
# hack/release-binaries.sh). Fails when a platform's archive is not listed.
#   usage: hack/stamp-krew.sh TAG SHA256SUMS > inference.yaml
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 TAG SHA256SUMS" >&2
  exit 2
fi
tag="$1"
sums="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
manifest="$(grep -v '^#' "$root/plugins/krew/inference.yaml")" # its comments are about the placeholders
for placeholder in $(grep -o 'SHA256_[A-Z0-9]*_[A-Z0-9]*' <<<"$manifest" | sort -u); do
  platform="${placeholder#SHA256_}"
  os="$(tr '[:upper:]' '[:lower:]' <<<"${platform%_*}")"
  arch="$(tr '[:upper:]' '[:lower:]' <<<"${platform#*_}")"
  archive="kubectl-inference-$tag-$os-$arch.tar.gz"
  sum="$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$sums")"
  if [[ ! "$sum" =~ ^[0-9a-f]{64}$ ]]; then
    echo "stamp-krew: no sha256 for $archive in $sums" >&2
    exit 1
  fi
  manifest="${manifest//$placeholder/$sum}"
done
printf '%s\n' "${manifest//VERSION/$tag}"
