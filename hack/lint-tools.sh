#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds the pinned linters, golangci-lint and actionlint, with the Go toolchain
# (`go install module@version`: each tool with its own go.mod, checked against
# the checksum database), once, into a cache outside the repository keyed on
# this script (which holds the versions) and the Go version. Prints the bin
# directory on the last line of stdout; progress goes to stderr.
#   usage: hack/lint-tools.sh
set -euo pipefail
golangci_lint_version=v2.15.0
actionlint_version=v1.7.12

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${IMA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-metrics-adapter/tools}"
key="$( { cat "$here/lint-tools.sh"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
bin="$cache_root/lint-$key/bin"

if [[ -x "$bin/golangci-lint" && -x "$bin/actionlint" ]]; then
  echo "lint-tools: cache current at $bin, skipping build" >&2
  echo "$bin"
  exit 0
fi

echo "lint-tools: building golangci-lint $golangci_lint_version and actionlint $actionlint_version into $bin" >&2
echo "lint-tools: the first build takes a few minutes on 2 cores (see CONTRIBUTING.md); later runs reuse it" >&2
rm -rf "$bin.tmp"
mkdir -p "$bin.tmp"
start=$(date +%s)
install() { # module-path@version
  local t0
  t0=$(date +%s)
  echo "lint-tools: go install $1" >&2
  # Outside any module, so that nothing of this repository's go.mod applies.
  (cd "$bin.tmp" && GOBIN="$bin.tmp" GOFLAGS=-trimpath CGO_ENABLED=0 go install "$1")
  echo "lint-tools: built $(basename "${1%@*}") in $(( $(date +%s) - t0 ))s" >&2
}
install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_lint_version"
install "github.com/rhysd/actionlint/cmd/actionlint@$actionlint_version"
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "lint-tools: done in $(( $(date +%s) - start ))s: $bin" >&2
echo "$bin"
