// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"time"
)

// verdict is one goal of docs/performance.md#goals judged on a run.
type verdict struct {
	goal, measured string
	met            bool
}

// The goals' bounds.
const (
	goalFreshnessP90   = 1500 * time.Millisecond
	goalCPUPerScrape   = 100 * time.Microsecond
	goalRSS1k          = 100 << 20
	goalCores10k       = 1.0
	goalRSS10k         = 200 << 20
	goalListP99        = 10 * time.Millisecond
	goalListClients    = 10
	goalPodsSmall      = 1000
	goalPodsLarge      = 10000
	goalIntervalSecond = time.Second
)

// judge returns the goals that run r, made with o, can judge: each goal
// is stated for a fleet size and interval, and the run must have
// measured what it needs.
func judge(r *results, o options) []verdict {
	var out []verdict
	at := func(pods int) bool { return o.pods == pods && o.interval == goalIntervalSecond }
	if at(goalPodsSmall) && len(r.freshness) > 0 {
		p90 := quantile(r.sortedFreshness(), 0.9)
		out = append(out, verdict{"1,000 pods at 1 s: a change visible within 1.5 s (p90)", fmt.Sprintf("%s%s", sec(p90), missedNote(r.missed)), p90 <= goalFreshnessP90 && r.missed == 0})
	}
	if r.quiet.totalScrapes() > 0 {
		per := r.quiet.perScrape(roleAdapter)
		out = append(out, verdict{"at most 0.1 ms of adapter CPU per pod-scrape", msPrecise(per), per <= goalCPUPerScrape})
	}
	if at(goalPodsSmall) && r.mem.rss > 0 {
		out = append(out, verdict{"1,000 pods at 1 s: at most 100 MB (VmRSS)", fmt.Sprintf("%d MB", r.mem.rss>>20), r.mem.rss <= goalRSS1k})
	}
	if at(goalPodsLarge) && r.quiet.window > 0 {
		cores := r.quiet.cores(roleAdapter)
		out = append(out, verdict{"10,000 pods at 1 s on at most 1 core", fmt.Sprintf("%.2f cores", cores), cores <= goalCores10k})
	}
	if at(goalPodsLarge) && r.mem.rss > 0 {
		out = append(out, verdict{"10,000 pods at 1 s in at most 200 MB (VmRSS)", fmt.Sprintf("%d MB", r.mem.rss>>20), r.mem.rss <= goalRSS10k})
	}
	if o.pods == goalPodsSmall {
		for _, l := range r.latency {
			if l.question != questionList || l.clients != goalListClients || l.answers == 0 {
				continue
			}
			measured := fmt.Sprintf("%s, %s", ms(l.p99), paceText(o.pace))
			if d, ok := alike(r.latency, questionDirect, l); ok {
				measured += fmt.Sprintf("; the adapter alone (asked directly) %s", ms(d.p99))
			}
			if f, ok := alike(r.latency, questionFloor, l); ok {
				measured += fmt.Sprintf("; the floor (kube-apiserver alone) %s", ms(f.p99))
			}
			out = append(out, verdict{fmt.Sprintf("the 1,000-pod list within 10 ms p99 with 10 clients (%s)", l.encoding.describe()), measured, l.p99 <= goalListP99})
		}
	}
	return out
}

// alike is question q's run with the same encoding and clients as l.
func alike(runs []latencyRun, q question, l latencyRun) (latencyRun, bool) {
	for _, f := range runs {
		if f.question == q && f.encoding == l.encoding && f.clients == l.clients && f.answers > 0 {
			return f, true
		}
	}
	return latencyRun{}, false
}

// printGoals writes the verdicts as a table, when there are any.
func printGoals(w io.Writer, vs []verdict) {
	if len(vs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGoals this run can judge (docs/performance.md#goals):")
	fmt.Fprintln(w, "\n| goal | measured | met |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, v := range vs {
		met := "no"
		if v.met {
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", v.goal, v.measured, met)
	}
}
