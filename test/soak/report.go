// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// judge turns the record into failed assertions.
func (r *result) judge() {
	fail := func(format string, args ...any) { r.failures = append(r.failures, fmt.Sprintf(format, args...)) }
	byKind := map[string][]violation{}
	for _, v := range r.tl.violations {
		byKind[v.kind] = append(byKind[v.kind], v)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		vs := byKind[k]
		fail("%s: %d time(s); first: %s", k, len(vs), vs[0].text)
	}
	for _, ft := range r.faults {
		if !ft.recovered || ft.recovery > ft.bound {
			fail("%s: %s (%s) did not recover within %s", vRecovery, ft.kind, ft.target, ft.bound)
		}
	}
	for _, lt := range r.lifetimes {
		if !lt.judged {
			continue
		}
		if lt.rssSlope > maxRSSSlope {
			fail("%s: replica %d (pid %d) RSS grew %.2f MiB/min over %s", vLeak, lt.replica, lt.pid, lt.rssSlope/(1<<20), lt.span.Round(time.Second))
		}
		if lt.gok && lt.gorSlope > maxGoroutineRate {
			fail("%s: replica %d (pid %d) goroutines grew %.2f/min over %s", vLeak, lt.replica, lt.pid, lt.gorSlope, lt.span.Round(time.Second))
		}
	}
	if r.logOK && r.logLines > maxLogLines {
		fail("%s: replica %d logged %d lines in one minute (bound %d)", vLogs, r.logReplica, r.logLines, maxLogLines)
	}
}

// print writes the fault table, the figures and the verdict.
func (r *result) print(out io.Writer, o options, total time.Duration) {
	fmt.Fprintf(out, "\nFaults (recovery: time from the restart, the kill or the mended page to the first correct answer through the aggregator)\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tat\tfault\ttarget\tdown / broken\tleft out after\trecovery\tbound\tnote")
	first := time.Time{}
	if len(r.faults) > 0 {
		first = r.faults[0].at
		for _, ft := range r.faults {
			if ft.at.Before(first) {
				first = ft.at
			}
		}
	}
	sorted := slices.Clone(r.faults)
	slices.SortFunc(sorted, func(a, b *fault) int { return a.at.Compare(b.at) })
	for i, ft := range sorted {
		left := "-"
		if strings.HasPrefix(ft.kind, "model server") {
			left = durText(ft.leftOut)
		}
		fmt.Fprintf(tw, "%d\t%.0fs\t%s\t%s\t%.1fs\t%s\t%s\t%s\t%s\n", i+1, ft.at.Sub(first).Seconds(), ft.kind, ft.target,
			ft.back.Sub(ft.at).Seconds(), left, recoveryText(ft), ft.bound, firstLine(ft.note))
	}
	tw.Flush()

	fmt.Fprintf(out, "\nRecovery by fault (max over the run)\n\n")
	worst := map[string]time.Duration{}
	count := map[string]int{}
	var order []string
	for _, ft := range sorted {
		k := ft.kind
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
		worst[k] = max(worst[k], ft.recovery)
	}
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tinjected\tmax recovery")
	for _, k := range order {
		fmt.Fprintf(tw, "%s\t%d\t%.1fs\n", k, count[k], worst[k].Seconds())
	}
	tw.Flush()

	tl := r.tl
	fmt.Fprintf(out, "\nSoaked %s (--duration %s, --seed %d), %s in all.\n", r.soaked.Round(time.Second), o.duration, o.seed, total.Round(time.Second))
	fmt.Fprintf(out, "Answers through the aggregator: %d (%d failed while a component was down, %d correct); violations: %d.\n",
		tl.total, tl.failed, tl.healthy, len(tl.violations))
	fmt.Fprintf(out, "Each replica asked directly too: %d answers (%d failed), judged by the same rules.\n", tl.directTotal, tl.directFailed)
	fmt.Fprintf(out, "Churn: %d pods created, %d deleted, %d replaced on a reused address (%d reuses in all), %d API calls failed (during faults).\n",
		r.churn.created, r.churn.deleted, r.churn.replaced, r.reuses, r.churn.failed)
	fmt.Fprintf(out, "HPA Deployment replicas: min %d, max %d (want %d throughout).\n", r.hpaLo, r.hpaHi, hpaReplicas)
	fmt.Fprintf(out, "\nAdapter processes (slopes after each process's first %s; judged over lifetimes >= %s: RSS <= %d MiB/min, goroutines <= %.0f/min)\n\n",
		warmUp, minLifetime, maxRSSSlope>>20, maxGoroutineRate)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "replica\tpid\tfitted over\tRSS first -> last\tRSS slope\tgoroutines first -> last\tgoroutine slope\tjudged")
	for _, lt := range r.lifetimes {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f -> %.0f MiB\t%+.2f MiB/min\t%.0f -> %.0f\t%+.2f/min\t%v\n", lt.replica, lt.pid,
			lt.span.Round(time.Second), float64(lt.rssFirst)/(1<<20), float64(lt.rssLast)/(1<<20), lt.rssSlope/(1<<20),
			lt.gorFirst, lt.gorLast, lt.gorSlope, lt.judged)
	}
	tw.Flush()
	if r.logOK {
		fmt.Fprintf(out, "Adapter logs: at most %d lines in one minute (replica %d; bound %d at --v=1).\n", r.logLines, r.logReplica, maxLogLines)
	}
	if len(r.failures) == 0 {
		fmt.Fprintf(out, "\nPASS: no foreign, inherited, zero or stale value; every fault recovered within its bound; no scale-down; flat; quiet.\n")
		return
	}
	fmt.Fprintf(out, "\nFAIL:\n")
	for _, f := range r.failures {
		fmt.Fprintf(out, "  - %s\n", f)
	}
	byKind := map[string]int{}
	for _, v := range tl.violations {
		if byKind[v.kind]++; byKind[v.kind] <= 5 {
			fmt.Fprintf(out, "    %s  %s: %s\n", v.at.Format("15:04:05.000"), v.kind, firstLine(v.text))
		}
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
