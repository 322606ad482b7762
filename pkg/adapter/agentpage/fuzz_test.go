// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package agentpage_test

import (
	"cmp"
	"math"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
)

// agentSeeds are pages from the tests: hand-written ones, and the bounds'
// and refusals' cases.
var agentSeeds = []string{
	`# HELP gpu_agent_up whatever
gpu_agent_up{backend="nvml",reason="ok"} 1
gpu_agent_gpu_utilization_ratio{container="a",gpu_model="X",gpu_uuid="GPU-1",namespace="ns",pod="p"} 0.5
gpu_agent_gpu_utilization_ratio{container="b",gpu_model="X",gpu_uuid="GPU-1",namespace="ns",pod="p"} 0.5
gpu_agent_gpu_utilization_ratio{container="b",gpu_model="X \"big\"",gpu_uuid="GPU-2",namespace="ns",pod="p"} 1 1700000000000
gpu_agent_gpu_sm_active_ratio{container="b",gpu_model="X",gpu_uuid="GPU-2",namespace="ns",pod="p"} NaN
gpu_agent_gpu_memory_used_bytes{container="",gpu_model="X",gpu_uuid="GPU-3",namespace="",pod=""} 7
gpu_agent_gpu_memory_used_bytes{namespace="ns",pod="p",gpu_uuid="GPU-1"} 100
gpu_agent_pod_gpus{namespace="ns",pod="p"} 2
gpu_agent_pod_gpus{namespace="ns2",pod="q"} 4
`,
	"gpu_agent_up{backend=\"nvml\",reason=\"ok\"} 1\r\n" +
		"gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1\r\n" +
		"gpu_agent_gpu_utilization_ratio{gpu_uuid=\"GPU-2\",namespace=\"ns\",pod=\"p\"} 0\r\n",
	"gpu_agent_up{backend=\"testing-fake-nvml/no-library\",reason=\"library_not_found\"} 0\n" +
		"gpu_agent_pod_gpus{namespace=\"a\\\\b\\nc\",pod=\"p\"} 2\n",
	"vllm:num_requests_waiting{engine=\"0\"} 3\n",
	"",
	"gpu_agent_up{reason=\"ok\"} 1\ngpu_agent_gpu_utilization_ratio{namespace=\"n\",pod=\"p\",gpu_uuid=\"g\"} busy\n",
	"gpu_agent_up 1\ngpu_agent_gpu_sm_active_ratio{namespace=\"n\",pod=\"p\",gpu_uuid=\"g\"} 38\n",
	"gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"n\",pod=\"p} 1\n",
	"gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"n\",pod=\"p\"} 1.5\n",
	"gpu_agent_up{backend=\"nvml\"}\n",
	"gpu_agent_up 1\ngpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} +Inf\n",
	"gpu_agent_up 1\ngpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1e308\n" +
		"gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\",namespace=\"ns\",pod=\"p\"} 1e308\n",
}

// FuzzParse parses any page twice: with a fresh Parser, and with one that
// parsed another page before (its reused memory must not leak into the
// answer). It holds that the parser never panics; gives the same answer
// both times; fails with a short, printable error; and, when it succeeds,
// answers each pod once, sorted, within MaxPods, with a GPU count and only
// values in their range (ratios in [0, 1], memory finite and not
// negative): never NaN, never a value the page did not give.
func FuzzParse(f *testing.F) {
	for _, s := range agentSeeds {
		f.Add([]byte(s))
	}
	warm := []byte(agentSeeds[0])
	f.Fuzz(func(t *testing.T, page []byte) {
		got, err := agentpage.Parse(page)
		var reused agentpage.Parser
		if _, err := reused.Parse(warm); err != nil {
			t.Fatal(err)
		}
		again, errAgain := reused.Parse(page)
		if (err == nil) != (errAgain == nil) || err != nil && err.Error() != errAgain.Error() {
			t.Fatalf("fresh parser: %v; reused parser: %v", err, errAgain)
		}
		if err != nil {
			if msg := err.Error(); len(msg) > 300 || escapetest.HasControl(msg) {
				t.Fatalf("error of %d bytes or with a control character: %q", len(msg), msg)
			}
			return
		}
		if diff := gocmp.Diff(got, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("fresh (-) and reused (+) parsers differ:\n%s", diff)
		}
		if len(got) > agentpage.MaxPods {
			t.Fatalf("%d pods, more than %d", len(got), agentpage.MaxPods)
		}
		for i, p := range got {
			if i > 0 {
				prev := got[i-1]
				if c := cmp.Or(cmp.Compare(prev.Namespace, p.Namespace), cmp.Compare(prev.Pod, p.Pod)); c >= 0 {
					t.Fatalf("pods %s/%s and %s/%s out of order or repeated", prev.Namespace, prev.Pod, p.Namespace, p.Pod)
				}
			}
			if p.Pod == "" || p.GPUs < 0 {
				t.Fatalf("pod %q with %d GPUs", p.Pod, p.GPUs)
			}
			for s := range catalog.Count {
				v, ok := p.Value(s)
				if !ok {
					if p.Values[s] != 0 {
						t.Fatalf("%s/%s: signal %v absent but holds %v", p.Namespace, p.Pod, s, p.Values[s])
					}
					continue
				}
				switch s {
				case catalog.GPUUtilization, catalog.GPUSMActive:
					if !(v >= 0 && v <= 1) {
						t.Fatalf("%s/%s: ratio %v of %v", p.Namespace, p.Pod, s, v)
					}
				case catalog.GPUMemoryUsedBytes:
					if !(v >= 0) || math.IsInf(v, 0) {
						t.Fatalf("%s/%s: memory %v", p.Namespace, p.Pod, v)
					}
				default:
					t.Fatalf("%s/%s: signal %v is not a GPU signal", p.Namespace, p.Pod, s)
				}
			}
		}
	})
}
