// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// maxSideBySide bounds --side-by-side. Every slot adds its own fleet (up
// to --max-replicas simulators), replay client, front end and sampler on
// the same CPUs as the control plane and the adapter, and at ×15 a
// millisecond a process waits for a CPU is 15 ms of simulated latency.
// Four slots are 32 simulators and four replay clients beside etcd, the
// API server, the HPA controller and the adapter: on the two cores the
// shootout is run on that is at least two busy processes a core, past
// which contention is certain rather than a question for the distortion
// check (docs/shootout.md), which has yet to say whether even two slots
// are fair.
const maxSideBySide = 4

// slotNode is the modelled node of slot (from 0): the first is
// framework.NodeName, the node the shootout has always run on; slot k is
// NodeName-(k+1).
func slotNode(slot int) string {
	if slot == 0 {
		return framework.NodeName
	}
	return fmt.Sprintf("%s-%d", framework.NodeName, slot+1)
}

// slotNamespace is the namespace of policy name's run on slot (from 0):
// shootout-NAME on the first, as one run at a time has always used;
// shootoutK-NAME on slot K-1, so that two repeats of a policy on two slots
// never share a namespace, and no policy name can make one slot's
// namespace another's.
func slotNamespace(name string, slot int) string {
	if slot == 0 {
		return "shootout-" + name
	}
	return fmt.Sprintf("shootout%d-%s", slot+1, name)
}

// slotAgentPod is the name of the gpu-agent pod on slot's node.
func slotAgentPod(slot int) string {
	if slot == 0 {
		return "gpu-agent-node" // the name one node has always had
	}
	return "gpu-agent-" + slotNode(slot)
}

// placement is where and beside what one run of the order ran.
type placement struct {
	// Slot is the slot (from 0): its node and namespace prefix.
	Slot int
	// Beside is the most other runs in flight at once while it ran.
	Beside int
}

// schedule runs n runs, run i by do(ctx, i, slot), at most width at once,
// in order: run i starts after run i-1 started, once a slot is free, on
// the lowest free slot. After a run's do returns (its teardown included:
// the slot's node is then empty), done gets its result and placement, one
// call at a time, and only then is the slot free for the next run. On the
// first error schedule starts no more runs, cancels the context of those
// in flight, waits for them and returns that error (with any other that
// is not the cancellation's); when ctx ends before every run started it
// returns ctx's error. started, unless nil, is called as run i takes its
// slot, in order, before do.
func schedule[R any](ctx context.Context, n, width int, do func(ctx context.Context, i, slot int) (R, error), done func(i int, r R, p placement) error, started func(i, slot int)) error {
	if width < 1 {
		return fmt.Errorf("schedule: width %d, want at least 1", width)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		busy     = make([]bool, width)
		inflight = map[int]*placement{}
		errs     []error
		doneMu   sync.Mutex
		wg       sync.WaitGroup
		begun    int
	)
	stopWaking := context.AfterFunc(ctx, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer stopWaking()
	for i := range n {
		mu.Lock()
		for !slices.Contains(busy, false) && len(errs) == 0 && ctx.Err() == nil {
			cond.Wait()
		}
		if len(errs) > 0 || ctx.Err() != nil {
			mu.Unlock()
			break
		}
		slot := slices.Index(busy, false)
		busy[slot] = true
		begun++
		p := &placement{Slot: slot}
		inflight[i] = p
		for _, q := range inflight {
			q.Beside = max(q.Beside, len(inflight)-1)
		}
		if started != nil {
			started(i, slot)
		}
		mu.Unlock()
		wg.Go(func() {
			r, err := do(ctx, i, slot)
			mu.Lock()
			delete(inflight, i)
			pl := *p
			mu.Unlock()
			if err == nil {
				doneMu.Lock()
				err = done(i, r, pl)
				doneMu.Unlock()
			}
			mu.Lock()
			defer mu.Unlock()
			busy[slot] = false
			if err != nil && (len(errs) == 0 || !errors.Is(err, context.Canceled)) {
				errs = append(errs, err)
			}
			if err != nil {
				cancel()
			}
			cond.Broadcast()
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if begun < n {
		return parent.Err()
	}
	return nil
}

// slotNodes are the nodes of n slots.
func slotNodes(n int) []string {
	out := make([]string, 0, n)
	for slot := range n {
		out = append(out, slotNode(slot))
	}
	return out
}

// insertByOrder inserts res into runs, which are sorted by Order, after
// every run of a lower or equal Order: side by side, runs finish out of
// order, and the report lists them in the order they started.
func insertByOrder(runs []runResult, res runResult) []runResult {
	i, _ := slices.BinarySearchFunc(runs, res.Order, func(r runResult, order int) int {
		if r.Order <= order {
			return -1
		}
		return 1
	})
	return slices.Insert(runs, i, res)
}
