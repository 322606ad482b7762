#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the real control-plane binaries (etcd, kube-apiserver, kube-controller-manager)
# and helm from the Go module proxy, once, into a cache outside the repository keyed on
# this module's go.sum. Prints the bin directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${IMA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-metrics-adapter/tools}"
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)"
bin="$cache_root/$key/bin"
want=(etcd kube-apiserver kube-controller-manager helm)

complete=1
for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || complete=0; done
if [[ $complete == 1 ]]; then
  echo "tools: cache current at $bin (key $key), skipping build" >&2
  echo "$bin"
  exit 0
fi

echo "tools: building etcd, kube-apiserver, kube-controller-manager, helm into $bin" >&2
echo "tools: the first build takes about 10 minutes on 2 cores (up to 20 on a busy machine; 3-4 GB of Go build cache); later runs reuse it" >&2
mkdir -p "$bin.tmp"
start=$(date +%s)
k8sver=v1.37.2
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$k8sver -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
done
cd "$here"
build() { # name package
  local t0=$(date +%s)
  echo "tools: go build $2" >&2
  go build -mod=mod -trimpath -ldflags "$ld" -o "$bin.tmp/$1" "$2"
  echo "tools: built $1 in $(( $(date +%s) - t0 ))s" >&2
}
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build helm helm.sh/helm/v3/cmd/helm
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "tools: done in $(( $(date +%s) - start ))s: $bin" >&2
echo "$bin"
