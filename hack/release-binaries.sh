#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Builds every command under cmd/ for each platform into OUT_DIR as
# <binary>-<tag>-<os>-<arch>.tar.gz (the binary, LICENSE and NOTICE) and writes
# OUT_DIR/SHA256SUMS over them. The release workflow attaches the result to the
# GitHub release.
#   usage: [PLATFORMS="linux/amd64 linux/arm64"] hack/release-binaries.sh TAG OUT_DIR
# gpu-agent needs cgo (go-nvml): for a platform other than this machine's, the C
# cross compiler comes from CC_<os>_<arch> (e.g. CC_linux_arm64), by default
# <gnu-triplet>-gcc (aarch64-linux-gnu-gcc: Debian/Ubuntu gcc-aarch64-linux-gnu).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: [PLATFORMS=\"linux/amd64 linux/arm64\"] $0 TAG OUT_DIR" >&2
  exit 2
fi
tag="$1"
out="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
platforms="${PLATFORMS:-linux/amd64 linux/arm64}"
cgo_binaries=" gpu-agent "
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
host="$(go env GOOS)/$(go env GOARCH)"

if [[ ! "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]]; then
  echo "release-binaries: tag $tag is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 1
fi
binaries=()
for d in "$root"/cmd/*/; do
  [[ -f "$d/main.go" ]] && binaries+=("$(basename "$d")")
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [[ -n "$(ls -A "$out")" ]]; then
  echo "release-binaries: $out is not empty (SHA256SUMS covers every archive in it)" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cross_cc() { # os arch
  local var="CC_$1_$2" triplet
  if [[ -n "${!var:-}" ]]; then echo "${!var}"; return; fi
  case "$2" in
    amd64) triplet=x86_64-linux-gnu ;;
    arm64) triplet=aarch64-linux-gnu ;;
    *) echo "release-binaries: no default C cross compiler for $1/$2: set $var" >&2; return 1 ;;
  esac
  echo "$triplet-gcc"
}

start=$(date +%s)
cd "$root"
for platform in $platforms; do
  os="${platform%/*}"
  arch="${platform#*/}"
  for b in "${binaries[@]}"; do
    cgo=0
    cc="${CC:-gcc}"
    if [[ "$cgo_binaries" == *" $b "* ]]; then
      cgo=1
      if [[ "$platform" != "$host" ]]; then cc="$(cross_cc "$os" "$arch")"; fi
      if ! command -v "$cc" >/dev/null 2>&1; then
        echo "release-binaries: $b for $platform needs cgo and the C compiler $cc, which is not installed" >&2
        exit 1
      fi
    fi
    t0=$(date +%s)
    dir="$work/$b-$tag-$os-$arch"
    mkdir -p "$dir"
    CGO_ENABLED=$cgo CC="$cc" GOOS="$os" GOARCH="$arch" \
      go build -trimpath -ldflags "-s -w" -o "$dir/$b" "./cmd/$b"
    cp LICENSE NOTICE "$dir/"
    tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out/$b-$tag-$os-$arch.tar.gz" "$(basename "$dir")"
    echo "release-binaries: $b $platform (cgo=$cgo) in $(( $(date +%s) - t0 ))s" >&2
  done
done
(cd "$out" && sha256sum -- *.tar.gz > SHA256SUMS)
echo "release-binaries: ${#binaries[@]} binaries x $(wc -w <<<"$platforms") platforms in $(( $(date +%s) - start ))s: $out (SHA256SUMS)" >&2
