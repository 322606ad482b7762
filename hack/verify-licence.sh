#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Checks that every source file git tracks (Go, shell, Dockerfiles, the
# Makefile, .ci/run) carries the licence header in its first five lines.
# With --fix it adds the header where it is missing: after a shebang or a
# Dockerfile's syntax line, followed by a blank line (so that a Go file's
# package comment stays its own).
set -euo pipefail
cd "$(dirname "$0")/.."

spdx="SPDX-License-Identifier: Apache-2.0"
fix=false
[[ ${1:-} == --fix ]] && fix=true

missing=()
while IFS= read -r f; do
  [[ -f $f ]] || continue
  head -n 5 "$f" | grep -q "$spdx" && continue
  if ! $fix; then
    missing+=("$f")
    continue
  fi
  case $f in
    *.go) c="//" ;;
    *) c="#" ;;
  esac
  header="$c Copyright The inference-metrics-adapter Authors.
$c $spdx"
  first=$(head -n 1 "$f")
  tmp=$(mktemp)
  if [[ $first == '#!'* || $first == '# syntax='* ]]; then
    { printf '%s\n%s\n\n' "$first" "$header"; tail -n +2 "$f"; } >"$tmp"
  else
    { printf '%s\n\n' "$header"; cat "$f"; } >"$tmp"
  fi
  cat "$tmp" >"$f" # keeps the file's mode
  rm -f "$tmp"
done < <(git ls-files '*.go' '*.sh' '*Dockerfile' Makefile .ci/run)

if ((${#missing[@]})); then
  echo "licence header missing (\"$spdx\" in the first five lines) in ${#missing[@]} file(s):"
  printf '  %s\n' "${missing[@]}"
  echo "run hack/verify-licence.sh --fix"
  exit 1
fi
