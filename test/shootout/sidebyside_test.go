// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestSchedule: runs start in the order given, never more than width at
// once, each on a slot nobody else holds, a slot taken again only after
// its run (teardown included) and its done returned; done sees every run
// once, one call at a time, with the most runs that were beside it.
func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, width int
	}{
		{name: "one at a time", n: 6, width: 1},
		{name: "two slots", n: 9, width: 2},
		{name: "four slots", n: 13, width: 4},
		{name: "more slots than runs", n: 2, width: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu        sync.Mutex
				started   []int
				inflight  int
				most      int
				slotBusy  = map[int]int{} // slot -> run holding it, from do's start to done's end
				running   = map[int]bool{}
				maxBeside = map[int]int{} // the most others running seen by each run
				inDone    bool
				finished  = map[int]placement{}
			)
			delays := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.width)))
			sleeps := make([]time.Duration, tc.n)
			for i := range sleeps {
				sleeps[i] = time.Duration(3+delays.IntN(8)) * time.Millisecond
			}
			note := func() { // mu held
				for r := range running {
					maxBeside[r] = max(maxBeside[r], len(running)-1)
				}
			}
			do := func(ctx context.Context, i, slot int) (string, error) {
				mu.Lock()
				if j, ok := slotBusy[slot]; ok {
					t.Errorf("run %d on slot %d while run %d holds it", i, slot, j)
				}
				if slot < 0 || slot >= tc.width {
					t.Errorf("run %d on slot %d, want 0 to %d", i, slot, tc.width-1)
				}
				slotBusy[slot] = i
				inflight++
				most = max(most, inflight)
				running[i] = true
				note()
				mu.Unlock()
				time.Sleep(sleeps[i]) // the replay, then the teardown
				mu.Lock()
				delete(running, i)
				inflight--
				mu.Unlock()
				return fmt.Sprintf("run %d", i), nil
			}
			done := func(i int, r string, p placement) error {
				mu.Lock()
				defer mu.Unlock()
				if inDone {
					t.Errorf("done of run %d while another done runs", i)
				}
				if r != fmt.Sprintf("run %d", i) {
					t.Errorf("done of run %d got %q", i, r)
				}
				if _, ok := finished[i]; ok {
					t.Errorf("done of run %d twice", i)
				}
				if slotBusy[p.Slot] != i {
					t.Errorf("run %d: placement slot %d is not the slot it ran on", i, p.Slot)
				}
				// The scheduler counts a run from its start until its do
				// returned, a little longer than do sees itself run.
				if p.Beside < maxBeside[i] || p.Beside > tc.width-1 {
					t.Errorf("run %d: beside %d, want %d to %d", i, p.Beside, maxBeside[i], tc.width-1)
				}
				finished[i] = p
				inDone = true
				mu.Unlock()
				time.Sleep(time.Millisecond) // writing the report: the slot stays taken
				mu.Lock()
				inDone = false
				delete(slotBusy, p.Slot)
				return nil
			}
			start := func(i, slot int) { // the scheduler's lock is held
				mu.Lock()
				started = append(started, i)
				mu.Unlock()
			}
			if err := schedule(context.Background(), tc.n, tc.width, do, done, start); err != nil {
				t.Fatal(err)
			}
			want := make([]int, tc.n)
			for i := range want {
				want[i] = i
			}
			if diff := cmp.Diff(want, started); diff != "" {
				t.Errorf("start order (-want +got):\n%s", diff)
			}
			if len(finished) != tc.n {
				t.Errorf("%d runs done, want %d", len(finished), tc.n)
			}
			if most > tc.width {
				t.Errorf("%d runs in flight at once, want at most %d", most, tc.width)
			}
			if tc.width == 1 {
				for i, p := range finished {
					if p != (placement{}) {
						t.Errorf("one at a time: run %d placed %+v, want slot 0 alone", i, p)
					}
				}
			}
			if wantMost := min(tc.n, tc.width); tc.width > 1 && most != wantMost {
				t.Errorf("at most %d runs in flight at once, want the slots filled: %d", most, wantMost)
			}
		})
	}
}

// TestScheduleBeside: runs that are all in flight at once each record the
// others, on slots of their own.
func TestScheduleBeside(t *testing.T) {
	const width = 3
	var mu sync.Mutex
	in := 0
	all := make(chan struct{})
	got := map[int]placement{}
	err := schedule(context.Background(), width, width, func(ctx context.Context, i, slot int) (int, error) {
		mu.Lock()
		if in++; in == width {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return i, nil
		case <-time.After(10 * time.Second):
			return 0, errors.New("the runs never were all in flight")
		}
	}, func(i, _ int, p placement) error {
		got[i] = p
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]placement{0: {Slot: 0, Beside: 2}, 1: {Slot: 1, Beside: 2}, 2: {Slot: 2, Beside: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}

// TestScheduleStopsOnError: a failed run starts no further run, cancels
// those in flight and is the error returned, without the cancellations';
// a done error stops it too.
func TestScheduleStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	var started []int
	begin := time.Now()
	err := schedule(context.Background(), 10, 2, func(ctx context.Context, i, slot int) (int, error) {
		mu.Lock()
		started = append(started, i)
		mu.Unlock()
		if i == 1 {
			return 0, boom
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("run %d: %w", i, ctx.Err())
		case <-time.After(10 * time.Second):
			return i, nil
		}
	}, func(int, int, placement) error { return nil }, nil)
	if !errors.Is(err, boom) || errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want boom alone", err)
	}
	slices.Sort(started)
	if !slices.Equal(started, []int{0, 1}) {
		t.Errorf("started %v, want runs 0 and 1 only: none after the failure", started)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("took %s: run 0 was not cancelled", d)
	}

	err = schedule(context.Background(), 5, 1, func(ctx context.Context, i, slot int) (int, error) { return i, nil },
		func(i int, _ int, _ placement) error {
			if i == 1 {
				return boom
			}
			if i > 1 {
				t.Errorf("done of run %d after a done failed", i)
			}
			return nil
		}, nil)
	if !errors.Is(err, boom) {
		t.Errorf("done error: got %v, want boom", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err = schedule(ctx, 3, 2, func(context.Context, int, int) (int, error) { ran = true; return 0, nil }, func(int, int, placement) error { return nil }, nil)
	if !errors.Is(err, context.Canceled) || ran {
		t.Errorf("cancelled context: error %v, ran %v; want context.Canceled and no run", err, ran)
	}
	if err := schedule(context.Background(), 1, 0, func(context.Context, int, int) (int, error) { return 0, nil }, func(int, int, placement) error { return nil }, nil); err == nil {
		t.Error("width 0: no error")
	}
}

// TestSlots: the first slot is the node and namespace one run at a time
// has always used; the others differ from it and from each other, for any
// policy name.
func TestSlots(t *testing.T) {
	if slotNode(0) != framework.NodeName || slotNamespace("gpu-60", 0) != "shootout-gpu-60" || slotAgentPod(0) != "gpu-agent-node" {
		t.Errorf("slot 0: node %s, namespace %s, agent %s; want those of one run at a time", slotNode(0), slotNamespace("gpu-60", 0), slotAgentPod(0))
	}
	nodes, agents := map[string]bool{}, map[string]bool{}
	namespaces := map[string]string{}
	names := []string{"a", "a-2", "2-a", "a2", "gpu-60", strings.Repeat("x", 40)}
	for slot := range maxSideBySide {
		nodes[slotNode(slot)], agents[slotAgentPod(slot)] = true, true
		for _, name := range names {
			ns := slotNamespace(name, slot)
			if prev, ok := namespaces[ns]; ok {
				t.Errorf("namespace %s of %s on slot %d is also %s's", ns, name, slot, prev)
			}
			namespaces[ns] = fmt.Sprintf("%s on slot %d", name, slot)
			if len(ns) > 63 {
				t.Errorf("namespace %s is longer than 63", ns)
			}
		}
	}
	if len(nodes) != maxSideBySide || len(agents) != maxSideBySide {
		t.Errorf("%d nodes and %d agent pods for %d slots: %v %v", len(nodes), len(agents), maxSideBySide, nodes, agents)
	}
}

// TestInsertByOrder: runs finishing out of order are listed by Order.
func TestInsertByOrder(t *testing.T) {
	var runs []runResult
	for _, o := range []int{2, 1, 4, 3, 5} {
		runs = insertByOrder(runs, runResult{Order: o})
	}
	var got []int
	for _, r := range runs {
		got = append(got, r.Order)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5}, got); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
}

// TestRunPlacementJSON: one at a time the report's runs have no slot,
// node or beside; side by side they do.
func TestRunPlacementJSON(t *testing.T) {
	alone, err := json.Marshal(runResult{Order: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"slot"`, `"node"`, `"beside"`} {
		if strings.Contains(string(alone), f) {
			t.Errorf("one at a time: %s has %s", alone, f)
		}
	}
	beside, err := json.Marshal(runResult{Order: 1, Slot: 2, Node: slotNode(1), Beside: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"slot":2`, `"node":"` + slotNode(1) + `"`, `"beside":1`} {
		if !strings.Contains(string(beside), f) {
			t.Errorf("side by side: %s lacks %s", beside, f)
		}
	}
}

// TestSideBySideFlag: --side-by-side defaults to 1 and takes 1 to
// maxSideBySide, not with --render.
func TestSideBySideFlag(t *testing.T) {
	getenv := func(string) string { return "/bin" }
	for _, tc := range []struct {
		name string
		args []string
		want int    // the config's, when valid
		err  string // part of the usage error
	}{
		{name: "default", args: nil, want: 1},
		{name: "two", args: []string{"--side-by-side", "2"}, want: 2},
		{name: "the bound", args: []string{"--side-by-side", fmt.Sprint(maxSideBySide)}, want: maxSideBySide},
		{name: "zero", args: []string{"--side-by-side", "0"}, err: fmt.Sprintf("--side-by-side must be 1 to %d, got 0", maxSideBySide)},
		{name: "negative", args: []string{"--side-by-side=-1"}, err: "--side-by-side must be 1 to"},
		{name: "over the bound", args: []string{"--side-by-side", fmt.Sprint(maxSideBySide + 1)}, err: fmt.Sprintf("got %d", maxSideBySide+1)},
		{name: "not a number", args: []string{"--side-by-side", "two"}, err: "invalid argument"},
		{name: "with render", args: []string{"--render", "--side-by-side", "2"}, err: "does not go with --render"},
		{name: "one with render", args: []string{"--render", "--side-by-side", "1"}, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseArgs(tc.args, getenv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || cli.ExitCode(err) != 2 {
					t.Fatalf("error %v (exit %d), want a usage error with %q", err, cli.ExitCode(err), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.sideBySide != tc.want {
				t.Errorf("side by side %d, want %d", cfg.sideBySide, tc.want)
			}
		})
	}
}

// TestPolicyOfNamespace: an HPA handed back from any slot's namespace is
// named after its policy; other namespaces are not read as one.
func TestPolicyOfNamespace(t *testing.T) {
	for _, name := range []string{"queue-3", "st-z1-w2m", "gpu-60"} {
		for slot := 0; slot < maxSideBySide; slot++ {
			ns := slotNamespace(name, slot)
			if got, ok := policyOfNamespace(ns); !ok || got != name {
				t.Errorf("policyOfNamespace(%q) = %q, %v; want %q", ns, got, ok, name)
			}
		}
	}
	for _, ns := range []string{"default", "shootout", "shootout-", "shootout1-x", "shootout02-x", "shootout2x", "myshootout-x"} {
		if got, ok := policyOfNamespace(ns); ok {
			t.Errorf("policyOfNamespace(%q) = %q, want none", ns, got)
		}
	}
}
