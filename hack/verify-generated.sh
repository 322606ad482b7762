#!/usr/bin/env bash
# Fails when manifests/ differs from what hack/render-manifests.sh renders from
# the chart now. Run by `make verify`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$root/hack/render-manifests.sh" "$tmp" 2>/dev/null
status=0
for f in inference-metrics-adapter.yaml gpu-agent.yaml; do
  if ! diff -u "$root/manifests/$f" "$tmp/$f" >"$tmp/$f.diff"; then
    echo "manifests/$f is out of date with the chart: run hack/render-manifests.sh (make manifests)" >&2
    head -n 40 "$tmp/$f.diff" >&2
    status=1
  fi
done
exit $status
