#!/usr/bin/env python3
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0
"""Split a merged trace's attainment by the file each request came from.

The shootout's report of parts 81 and 82 scored a merged trace (--trace A+B) as
one: its requests CSV has no source column (later reports have it, and print
each file's attainment themselves). This reads such a
run's <trace>-requests.csv and the two Azure trace files, matches every request
to the trace row with the same prompt and output length whose arrival is
nearest its send time (within 5 s; a prompt clipped to the context matches on
its output length), and prints, per policy and file, the attainment after the
warm-up of each repeat, and the minutes that lost most.

Usage, from the repository root:
  python3 docs/shootout-runs/2026-12-07-mixed-part81/split-by-file.py \
      'shootout-out/X/azure-llm-2023-code+azure-llm-2023-conv-requests.csv' [--minutes]
"""
import bisect
import collections
import csv
import datetime
import gzip
import statistics
import sys

WARMUP_S = 600
FILES = {"code": "testdata/traces/azure-llm-2023-code.csv.gz",
         "conv": "testdata/traces/azure-llm-2023-conv.csv.gz"}


def read(path):
    with gzip.open(path, "rt") as f:
        return [(datetime.datetime.strptime(r["TIMESTAMP"][:26], "%Y-%m-%d %H:%M:%S.%f"),
                 int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in csv.DictReader(f)]


rows = {label: read(path) for label, path in FILES.items()}
t0 = min(r[0][0] for r in rows.values())
by_output = collections.defaultdict(list)
for label, rs in rows.items():
    for t, prompt, output in rs:
        by_output[output].append(((t - t0).total_seconds(), prompt, label))
for v in by_output.values():
    v.sort()

total = collections.defaultdict(collections.Counter)
good = collections.defaultdict(collections.Counter)
lost_by_minute = collections.defaultdict(collections.Counter)
unmatched = 0
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        sent, prompt, output = float(r["sent_s"]), int(r["prompt_tokens"]), int(r["output_tokens"])
        cands = by_output.get(output, [])
        i = bisect.bisect_left(cands, (sent - 5,))
        best = None
        while i < len(cands) and cands[i][0] <= sent + 5:
            if cands[i][1] == prompt or prompt + output >= 8000:
                d = abs(cands[i][0] - sent)
                if best is None or d < best[0]:
                    best = (d, cands[i][2])
            i += 1
        if best is None:
            unmatched += 1
            continue
        if sent < WARMUP_S:
            continue
        key = (r["policy"], best[1])
        total[key][r["repeat"]] += 1
        if r["good"] == "true":
            good[key][r["repeat"]] += 1
        else:
            lost_by_minute[key][int(sent // 60)] += 1

print("unmatched requests:", unmatched)
for key in sorted(total):
    per_run = [100 * good[key][rep] / total[key][rep] for rep in sorted(total[key])]
    print(key, "per run", " ".join("%.1f" % x for x in per_run), "mean %.1f" % statistics.mean(per_run),
          "requests", sum(total[key].values()), "lost", sum(total[key].values()) - sum(good[key].values()))
if "--minutes" in sys.argv:
    for key in sorted(lost_by_minute):
        print(key, "most lost (minute, requests):", lost_by_minute[key].most_common(8))
