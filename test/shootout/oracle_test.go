// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// arrivals is n requests spread over minute m (simulated).
func arrivals(m, n int) []loadgen.TraceRequest {
	var out []loadgen.TraceRequest
	for i := range n {
		out = append(out, loadgen.TraceRequest{At: time.Duration(m)*time.Minute + time.Duration(i)*time.Minute/time.Duration(n)})
	}
	return out
}

func TestOracleSchedule(t *testing.T) {
	m := time.Minute
	tests := []struct {
		name       string
		reqs       []loadgen.TraceRequest
		capacity   float64
		lead       time.Duration
		minR, maxR int
		want       []oracleStep
	}{
		{
			name: "no requests: the minimum", capacity: 1, lead: 75 * time.Second, minR: 1, maxR: 8,
			want: []oracleStep{{0, 1}},
		},
		{
			// 120 requests in minute 0 at 1/s per replica: 2 replicas from
			// the start, down to the minimum when minute 0 ends.
			name: "busy start", reqs: arrivals(0, 120), capacity: 1, lead: 75 * time.Second, minR: 1, maxR: 8,
			want: []oracleStep{{0, 2}, {m, 1}},
		},
		{
			// A burst in minute 3 needs 4 (239 / 60 rounded up): started 75 s
			// ahead (2m45s), held until minute 3 ends.
			name: "burst ahead of time", reqs: append(arrivals(0, 30), arrivals(3, 239)...), capacity: 1, lead: 75 * time.Second, minR: 1, maxR: 8,
			want: []oracleStep{{0, 1}, {105 * time.Second, 4}, {4 * m, 1}},
		},
		{
			name: "capped at the maximum", reqs: arrivals(2, 6000), capacity: 1, lead: 30 * time.Second, minR: 1, maxR: 8,
			want: []oracleStep{{0, 1}, {90 * time.Second, 8}, {3 * m, 1}},
		},
		{
			// Two busy minutes one apart: the look-ahead of one bin plus
			// lead keeps the fleet through the gap.
			name: "short gap held", reqs: append(arrivals(1, 180), arrivals(3, 180)...), capacity: 1, lead: 75 * time.Second, minR: 2, maxR: 8,
			want: []oracleStep{{0, 3}, {4 * m, 2}},
		},
		{
			// A lead that is a whole number of bins: the replica is Ready
			// as its bin starts.
			name: "lead on a bin edge", reqs: arrivals(2, 120), capacity: 1, lead: time.Minute, minR: 1, maxR: 8,
			want: []oracleStep{{0, 1}, {m, 2}, {3 * m, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := oracle{Capacity: tt.capacity}.schedule(tt.reqs, tt.lead, tt.minR, tt.maxR)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("schedule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFollowSchedule(t *testing.T) {
	c := fake.NewClientset(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deploymentName, Namespace: "ns"}})
	var got []int32
	c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		got = append(got, s.Spec.Replicas)
		return true, s, nil
	})
	tm := newTiming(15, time.Minute)
	steps := []oracleStep{{0, 2}, {150 * time.Millisecond, 5}, {300 * time.Millisecond, 1}}
	if err := followSchedule(context.Background(), c, "ns", steps, time.Now(), tm); err != nil {
		t.Fatal(err)
	}
	// The first step is the fleet the run starts with: not set again.
	if diff := cmp.Diff([]int32{5, 1}, got); diff != "" {
		t.Errorf("scales set (-want +got):\n%s", diff)
	}

	// A step after the context ends is not set.
	got = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := followSchedule(ctx, c, "ns", []oracleStep{{0, 2}, {time.Hour, 8}}, time.Now(), tm); err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Errorf("scales set after the context ended: %v", got)
	}
}
