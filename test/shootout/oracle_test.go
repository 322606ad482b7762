// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
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
		o          oracle // lag and hold; its capacity is capacity
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
		{
			// Lagged by 75 s: every change but the first made later.
			name: "lag", reqs: append(arrivals(0, 120), arrivals(3, 239)...), capacity: 1, lead: 75 * time.Second, minR: 1, maxR: 8,
			o:    oracle{Lag: 75 * time.Second},
			want: []oracleStep{{0, 2}, {m + 75*time.Second, 1}, {3 * m, 4}, {5*m + 15*time.Second, 1}},
		},
		{
			// Held 2 minutes (and 90 s rounds up to 2): minute 0's 2 kept
			// through minutes 1 and 2, minute 3's 4 through 4 and 5.
			name: "hold", reqs: append(arrivals(0, 120), arrivals(3, 239)...), capacity: 1, lead: 75 * time.Second, minR: 1, maxR: 8,
			o:    oracle{Hold: 90 * time.Second},
			want: []oracleStep{{0, 2}, {105 * time.Second, 4}, {6 * m, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			if o.Capacity == 0 {
				o.Capacity = tt.capacity
			}
			got := o.schedule(tt.reqs, tt.lead, tt.minR, tt.maxR)
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

func TestParseOracle(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
		want        oracle
	}{
		{in: "3.25", want: oracle{Capacity: 3.25}},
		{in: "0.5@lag=75s@hold=5m", want: oracle{Capacity: 0.5, Lag: 75 * time.Second, Hold: 5 * time.Minute}},
		{in: "0", wantErr: "capacity above 0"},
		{in: "-1", wantErr: "capacity above 0"},
		{in: "NaN", wantErr: "capacity above 0"},
		{in: "+Inf", wantErr: "capacity above 0"},
		{in: "1e9", wantErr: "at most 1000"},
		{in: "", wantErr: "capacity above 0"},
		{in: "1@lag=soon", wantErr: `option "lag=soon"`},
		{in: "1@wait=1m", wantErr: `option "wait=1m"`},
		{in: "1@lag=-1s", wantErr: "lag must be 0 to 1h0m0s"},
		{in: "1@hold=2h", wantErr: "hold must be 0 to 1h0m0s"},
	} {
		got, err := parseOracle(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseOracle(%q): error %v, want one with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || *got != tc.want {
			t.Errorf("parseOracle(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
