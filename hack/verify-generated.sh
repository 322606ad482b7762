#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Fails when manifests/ differs from what hack/render-manifests.sh renders from
# the chart now. Run by `make verify`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# stderr passes through: on a fresh machine rendering first builds helm (and
# the rest of the test tools, cached), which takes minutes and says so.
"$root/hack/render-manifests.sh" "$tmp"
status=0
for f in inference-metrics-adapter.yaml api-networkpolicy.yaml gpu-agent.yaml; do
  if ! diff -u "$root/manifests/$f" "$tmp/$f" >"$tmp/$f.diff"; then
    echo "manifests/$f is out of date with the chart: run hack/render-manifests.sh (make manifests)" >&2
    head -n 40 "$tmp/$f.diff" >&2
    status=1
  fi
done
exit $status
