#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# show-failures.sh LOG [MAX]: prints what the failed tests of a `go test -v`
# log said, so that a failure's reason reaches a log that keeps only the
# progress lines: each failed test's (and failed subtest's) lines, found by
# the test that the === RUN, NAME and CONT markers name, at most MAX lines
# (default 400).
set -euo pipefail
log=${1:?usage: show-failures.sh LOG [MAX]}
max=${2:-400}
awk -v max="$max" '
  NR == FNR {
    if ($0 ~ /^ *--- FAIL: /) { name = $0; sub(/^ *--- FAIL: /, "", name); sub(/ .*/, "", name); failed[name] = 1 }
    next
  }
  /^=== (RUN|NAME|CONT|PAUSE) / { cur = $3; next }
  /^ *--- (PASS|FAIL|SKIP): / { cur = ""; next }
  cur != "" && (cur in failed) {
    if (printed < max) print
    else if (printed == max) print "(cut at " max " lines: see " FILENAME ")"
    printed++
  }
' "$log" "$log"
