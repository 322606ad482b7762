#!/usr/bin/env bash
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Runs a long command and, while it runs, prints a line to stderr every
# PROGRESS_EVERY seconds (default 30) saying it is still running, so that a
# cold build is never minutes of silence. The command's own output and exit
# status pass through unchanged.
#   usage: hack/with-progress.sh LABEL COMMAND [ARG...]
set -uo pipefail
label="$1"
shift
every="${PROGRESS_EVERY:-30}"
start=$(date +%s)
"$@" &
cmd=$!
(
  while sleep "$every"; do
    kill -0 "$cmd" 2>/dev/null || exit 0
    echo "$label: still running ($(( $(date +%s) - start ))s elapsed)" >&2
  done
) &
ticker=$!
wait "$cmd"
rc=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit "$rc"
