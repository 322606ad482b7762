package agentpage_test

import (
	"strings"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/agentpage"
)

// Memory used has no upper bound, but an infinite value, or a sum over a
// pod's GPUs that overflows to infinity, is no measurement: the page is
// refused, as a negative value is, rather than passing +Inf on as a value.
func TestDefect_InfiniteMemoryIsRefused(t *testing.T) {
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
