// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// oracleBin is the width of the oracle's load bins, in simulated time: one
// minute, the unit of the traces' burst definition.
const oracleBin = time.Minute

// maxOracleCapacity bounds an oracle's per-replica capacity (requests per
// simulated second): a replica of the simulator serves a few per second.
const maxOracleCapacity = 1000.0

// maxOracleShift bounds an oracle's lag and hold (simulated).
const maxOracleShift = time.Hour

// oracle is a clairvoyant fleet: no HPA, but a replica count set on a
// schedule computed from the trace it is judged on, so that each minute's
// arrivals find ceil(arrivals per second ÷ Capacity) replicas Ready. It
// peeks at the future by design: it is a reference for what a perfect
// forecast of each minute's load would buy, not a policy a cluster can run.
// Lag and Hold turn it into a perfectly informed reactive fleet: each
// change made Lag later, each minute's count kept for Hold after it ends.
type oracle struct {
	// Capacity is the requests per simulated second one replica serves
	// within the SLO (the capacity probe measures it for the trace's mix).
	Capacity float64 `json:"capacity"`
	// Lag delays every change of the schedule but the first (simulated).
	Lag time.Duration `json:"lag,omitempty"`
	// Hold keeps each minute's count for this long after the minute ends
	// (simulated, rounded up to whole minutes), as a scale-down window does.
	Hold time.Duration `json:"hold,omitempty"`
}

// oracleWhy says what the oracle o is, for the report.
func oracleWhy(o *oracle) string {
	why := fmt.Sprintf("clairvoyant: each minute's arrivals of the trace at %g requests per second per replica, started one cold start and one HPA sync ahead", o.Capacity)
	if o.Lag > 0 {
		why += fmt.Sprintf(", every change made %s later", o.Lag)
	}
	if o.Hold > 0 {
		why += fmt.Sprintf(", each minute's count held %s after it", o.Hold)
	}
	return why + "; it peeks at the trace, a reference, not a policy"
}

// oracleStep is one change of the oracle's replica count: from At
// (simulated time since the replay started) on, Replicas.
type oracleStep struct {
	At       time.Duration
	Replicas int
}

// parseOracle parses the CAPACITY[@lag=D][@hold=D] of NAME=oracle:....
func parseOracle(s string) (*oracle, error) {
	capText, opts, _ := strings.Cut(s, "@")
	c, err := strconv.ParseFloat(capText, 64)
	if err != nil {
		return nil, capacityError(strconv.Quote(capText))
	}
	o := &oracle{Capacity: c}
	if opts != "" {
		for _, opt := range strings.Split(opts, "@") {
			key, val, _ := strings.Cut(opt, "=")
			d, err := time.ParseDuration(val)
			if err != nil {
				return nil, fmt.Errorf("oracle option %q: want lag=DURATION or hold=DURATION", opt)
			}
			switch key {
			case "lag":
				o.Lag = d
			case "hold":
				o.Hold = d
			default:
				return nil, fmt.Errorf("oracle option %q: want lag=DURATION or hold=DURATION", opt)
			}
		}
	}
	return o, o.validate()
}

// capacityError is the error of a capacity that is not a number above 0
// and at most maxOracleCapacity; got is the capacity as given.
func capacityError(got string) error {
	return fmt.Errorf("an oracle needs a capacity above 0 and at most %g requests per second per replica, got %s", maxOracleCapacity, got)
}

// validate refuses a capacity that is not a positive finite number of at
// most maxOracleCapacity, and a lag or hold outside [0, maxOracleShift].
func (o oracle) validate() error {
	if !(o.Capacity > 0) || o.Capacity > maxOracleCapacity || math.IsInf(o.Capacity, 0) {
		return capacityError(strconv.FormatFloat(o.Capacity, 'g', -1, 64))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"lag", o.Lag}, {"hold", o.Hold}} {
		if d.d < 0 || d.d > maxOracleShift {
			return fmt.Errorf("an oracle's %s must be 0 to %s, got %s", d.name, maxOracleShift, d.d)
		}
	}
	return nil
}

// schedule is the oracle's replica count over the replay of reqs: bin b
// (oracleBin wide) needs ceil(arrivals_b ÷ (bin seconds × Capacity))
// replicas, within [minR, maxR]; at time t the fleet holds the most any bin
// from t to t+lead (both ends in) needs, so that a replica started lead ahead is Ready
// when its bin starts and stays until the last bin that needs it has
// ended. The first step is at 0. Steps are in time order, each a change.
// Hold widens each bin's need over the bins before it; Lag delays every
// step but the first.
func (o oracle) schedule(reqs []loadgen.TraceRequest, lead time.Duration, minR, maxR int) []oracleStep {
	var counts []int
	for _, r := range reqs {
		b := int(max(r.At, 0) / oracleBin)
		for len(counts) <= b {
			counts = append(counts, 0)
		}
		counts[b]++
	}
	perBin := oracleBin.Seconds() * o.Capacity
	own := make([]int, len(counts))
	for b, n := range counts {
		own[b] = min(max(int(math.Ceil(float64(n)/perBin)), minR), maxR)
	}
	// With a hold, bin b needs the most of itself and the bins that ended
	// within the hold before it (the last bin's count outlasts the trace).
	held := int(math.Ceil(float64(o.Hold) / float64(oracleBin)))
	need := make([]int, len(own)+held)
	for b := range need {
		for k := max(0, b-held); k <= min(b, len(own)-1); k++ {
			need[b] = max(need[b], own[k])
		}
	}
	// The count changes only where a bin enters the look-ahead (b·bin −
	// lead) or leaves it (b·bin, when bin b−1 ends).
	times := []time.Duration{0}
	for b := range need {
		start := time.Duration(b) * oracleBin
		times = append(times, max(start-lead, 0), start)
	}
	times = append(times, time.Duration(len(need))*oracleBin)
	slices.Sort(times)
	times = slices.Compact(times)
	var out []oracleStep
	for _, t := range times {
		n := minR
		// A replica started at t is Ready at t+lead: the bin starting
		// then is one it must serve.
		first, last := int(t/oracleBin), int((t+lead)/oracleBin)
		for b := first; b <= last && b < len(need); b++ {
			n = max(n, need[b])
		}
		if len(out) == 0 || out[len(out)-1].Replicas != n {
			out = append(out, oracleStep{At: t, Replicas: n})
		}
	}
	for i := 1; i < len(out); i++ {
		out[i].At += o.Lag
	}
	return out
}

// oracleLead is how far ahead of its bin the oracle starts a replica: the
// cold start and one HPA sync period for the pod to be created, scheduled
// and seen Ready.
func oracleLead(tm timing) time.Duration { return tm.ColdStart + tm.HPASync }

// followSchedule sets the Deployment's replicas to each step's count at its
// time (simulated time since start, mapped to wall time), until the steps
// run out or ctx ends. The first step is the fleet the run started with.
func followSchedule(ctx context.Context, c kubernetes.Interface, ns string, steps []oracleStep, start time.Time, tm timing) error {
	for _, s := range steps[min(1, len(steps)):] {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(tm.wall(s.At)))):
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.AppsV1().Deployments(ns).UpdateScale(sctx, deploymentName, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: deploymentName, Namespace: ns},
			Spec:       autoscalingv1.ScaleSpec{Replicas: int32(s.Replicas)},
		}, metav1.UpdateOptions{})
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("oracle: scale %s/%s to %d at %s: %w", ns, deploymentName, s.Replicas, s.At, err)
		}
	}
	return nil
}
