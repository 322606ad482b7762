// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package agentpage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
)

// Memory used has no upper bound, but an infinite value, or a sum over a
// pod's GPUs that overflows to infinity, is no measurement: the page is
// refused, as a negative value is, rather than passing +Inf on as a value.
// Was wrong: +Inf memory, read or summed, was passed on as a value.
func TestInfiniteMemoryIsRefused(t *testing.T) {
	const up = "gpu_agent_up{backend=\"nvml\",reason=\"ok\"} 1\n"
	tests := []struct {
		name    string
		page    string
		wantErr string
	}{{
		name:    "+Inf",
		page:    up + "gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} +Inf\n",
		wantErr: "agent page line 2 (gpu_agent_gpu_memory_used_bytes): value +Inf out of range",
	}, {
		name:    "-Inf",
		page:    up + "gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} -Inf\n",
		wantErr: "agent page line 2 (gpu_agent_gpu_memory_used_bytes): value -Inf out of range",
	}, {
		name: "sum over the pod's GPUs overflows",
		page: up + "gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1e308\n" +
			"gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\",namespace=\"ns\",pod=\"p\"} 1e308\n",
		wantErr: "agent page line 3 (gpu_agent_gpu_memory_used_bytes): the sum over the pod's GPUs overflows",
	}, {
		name: "a large finite sum is kept",
		page: up + "gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1e300\n" +
			"gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\",namespace=\"ns\",pod=\"p\"} 1e300\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agentpage.Parse([]byte(tt.page))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want the error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := pod("ns", "p", 2, -1, -1, 2e300); len(got) != 1 || got[0] != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// The parser's lookups are linear (so that it does not allocate), so the
// pods and GPU series one page may hold are bounded: a page within the body
// size limit that names tens of thousands of pods is refused at the bound
// instead of costing seconds of CPU. A page at the bounds parses.
// Was wrong: a 4 MiB page of 51,421 pods took 37 s of CPU in the lookups.
func TestPodsAndGPUSeriesPerPageBounded(t *testing.T) {
	const up = "gpu_agent_up{backend=\"nvml\",reason=\"ok\"} 1\n"
	pods := func(n int) string {
		var b strings.Builder
		b.WriteString(up)
		for i := range n {
			fmt.Fprintf(&b, "gpu_agent_pod_gpus{namespace=\"ns\",pod=\"p%d\"} 1\n", i)
		}
		return b.String()
	}
	// series spreads n GPU series over the most pods allowed, one signal
	// each (utilization, on distinct GPUs).
	series := func(n int) string {
		var b strings.Builder
		b.WriteString(up)
		for i := range n {
			fmt.Fprintf(&b, "gpu_agent_gpu_utilization_ratio{gpu_uuid=\"GPU-%d\",namespace=\"ns\",pod=\"p%d\"} 0.5\n", i, i%agentpage.MaxPods)
		}
		return b.String()
	}
	tests := []struct {
		name     string
		page     string
		wantPods int
		wantErr  string
	}{
		{"pods at the bound", pods(agentpage.MaxPods), agentpage.MaxPods, ""},
		{"one pod more", pods(agentpage.MaxPods + 1), 0, fmt.Sprintf("agent page line %d (gpu_agent_pod_gpus): the page names more than %d pods", agentpage.MaxPods+2, agentpage.MaxPods)},
		{"GPU series at the bound", series(agentpage.MaxGPUSeries), agentpage.MaxPods, ""},
		{"one GPU series more", series(agentpage.MaxGPUSeries + 1), 0, fmt.Sprintf("agent page line %d (gpu_agent_gpu_utilization_ratio): the page holds more than %d per-pod GPU series", agentpage.MaxGPUSeries+2, agentpage.MaxGPUSeries)},
	}
	var p agentpage.Parser
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Parse([]byte(tc.page))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Parse: error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(got) != tc.wantPods {
				t.Errorf("Parse: %d pods, want %d", len(got), tc.wantPods)
			}
		})
	}
}
