// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package agentpage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/gpuagent"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

// agentPage runs the real agent collector over a fake NVML profile and a real
// pod-resources server, twice a second apart, and returns its /metrics page.
func agentPage(t testing.TB, profile string, set func(s *podresourcestest.Server)) []byte {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	srv, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	set(srv)
	client, err := podresources.NewClient(sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	reader, err := nvml.NewFakeReader(profile, clock)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	agent := gpuagent.New(gpuagent.Config{
		GPUs: reader, Backend: reader.Backend(), Pods: client,
		ResourceNames: []string{"nvidia.com/gpu"},
		Interval:      time.Second, MaxRetryInterval: time.Minute, Now: clock,
	})
	agent.CollectOnce(context.Background())
	now = now.Add(time.Second)
	agent.CollectOnce(context.Background())
	reg := prometheus.NewRegistry()
	reg.MustRegister(agent)
	rec := httptest.NewRecorder()
	agent.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func uuid(profile string, i int) string { return nvml.FakeUUID(profile, i) }

func values(util, sm, mem float64) ([catalog.Count]float64, catalog.Set) {
	var v [catalog.Count]float64
	var has catalog.Set
	for _, x := range []struct {
		s catalog.Signal
		v float64
	}{{catalog.GPUUtilization, util}, {catalog.GPUSMActive, sm}, {catalog.GPUMemoryUsedBytes, mem}} {
		if x.v >= 0 {
			v[x.s] = x.v
			has = has.Add(x.s)
		}
	}
	return v, has
}

func pod(ns, name string, gpus int, util, sm, mem float64) agentpage.PodGPU {
	v, has := values(util, sm, mem)
	return agentpage.PodGPU{Namespace: ns, Pod: name, GPUs: gpus, Values: v, Has: has}
}

func TestParseAgentPages(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		profile    string
		set        func(s *podresourcestest.Server)
		want       []agentpage.PodGPU
		wantStatus agentpage.Status
	}{{
		name:    "H100 busy: utilization, SM activity, memory",
		profile: "h100-busy",
		set: func(s *podresourcestest.Server) {
			s.SetPods(
				podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", uuid("h100-busy", 0), uuid("h100-busy", 1)),
				podresourcestest.Pod("default", "vllm-1", "server", "nvidia.com/gpu", uuid("h100-busy", 2)+"::0"),
				podresourcestest.Pod("team-b", "sharer", "main", "nvidia.com/gpu", uuid("h100-busy", 2)+"::1"),
			)
		},
		want: []agentpage.PodGPU{
			pod("default", "vllm-0", 2, 1, 0.38, 2*72*gib),
			pod("default", "vllm-1", 1, 1, 0.38, 72*gib),
			pod("team-b", "sharer", 1, 1, 0.38, 72*gib),
		},
		wantStatus: agentpage.Status{Up: true, Reason: "ok", Backend: "testing-fake-nvml/h100-busy"},
	}, {
		name:    "A100: no GPM, so SM activity is absent",
		profile: "dgxa100",
		set: func(s *podresourcestest.Server) {
			s.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", uuid("dgxa100", 5)))
		},
		want:       []agentpage.PodGPU{pod("default", "vllm-0", 1, 0.35, -1, 12*gib)},
		wantStatus: agentpage.Status{Up: true, Reason: "ok", Backend: "testing-fake-nvml/dgxa100"},
	}, {
		name:    "no NVML: the pod's GPUs are counted, every value is absent",
		profile: "no-library",
		set: func(s *podresourcestest.Server) {
			s.SetPods(podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", "GPU-a", "GPU-b"))
		},
		want:       []agentpage.PodGPU{pod("default", "vllm-0", 2, -1, -1, -1)},
		wantStatus: agentpage.Status{Up: false, Reason: "library_not_found", Backend: "testing-fake-nvml/no-library"},
	}, {
		name:       "no pods hold GPUs",
		profile:    "dgxh100",
		set:        func(*podresourcestest.Server) {},
		want:       []agentpage.PodGPU{},
		wantStatus: agentpage.Status{Up: true, Reason: "ok", Backend: "testing-fake-nvml/dgxh100"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := agentPage(t, tt.profile, tt.set)
			var p agentpage.Parser
			for range 2 { // a reused Parser gives the same answer
				got, err := p.Parse(page)
				if err != nil {
					t.Fatalf("%v\n%s", err, page)
				}
				if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("pods (-want +got):\n%s\npage:\n%s", diff, page)
				}
				if diff := cmp.Diff(tt.wantStatus, p.Status()); diff != "" {
					t.Errorf("status (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseHandWritten(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		want    []agentpage.PodGPU
		wantErr string
	}{{
		name: "two containers of one pod share a GPU: counted once; escapes, timestamps, NaN",
		page: `# HELP gpu_agent_up whatever
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
		want: []agentpage.PodGPU{pod("ns", "p", 2, 0.75, -1, 100), pod("ns2", "q", 4, -1, -1, -1)},
	}, {
		name: "GPU count from the series when gpu_agent_pod_gpus is missing",
		page: "gpu_agent_up{backend=\"nvml\",reason=\"ok\"} 1\r\n" +
			"gpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1\r\n" +
			"gpu_agent_gpu_utilization_ratio{gpu_uuid=\"GPU-2\",namespace=\"ns\",pod=\"p\"} 0\r\n",
		want: []agentpage.PodGPU{pod("ns", "p", 2, 0, -1, 1)},
	}, {
		name:    "not an agent page",
		page:    "vllm:num_requests_waiting{engine=\"0\"} 3\n",
		wantErr: agentpage.ErrNotAgentPage.Error(),
	}, {
		name:    "empty page",
		page:    "",
		wantErr: agentpage.ErrNotAgentPage.Error(),
	}, {
		name:    "bad value",
		page:    "gpu_agent_up{reason=\"ok\"} 1\ngpu_agent_gpu_utilization_ratio{namespace=\"n\",pod=\"p\",gpu_uuid=\"g\"} busy\n",
		wantErr: `agent page line 2 (gpu_agent_gpu_utilization_ratio): invalid value "busy"`,
	}, {
		name:    "ratio out of range",
		page:    "gpu_agent_up 1\ngpu_agent_gpu_sm_active_ratio{namespace=\"n\",pod=\"p\",gpu_uuid=\"g\"} 38\n",
		wantErr: "agent page line 2 (gpu_agent_gpu_sm_active_ratio): value 38 out of range",
	}, {
		name:    "unterminated label",
		page:    "gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"n\",pod=\"p} 1\n",
		wantErr: "agent page line 2 (gpu_agent_pod_gpus): unterminated quoted string",
	}, {
		name:    "fractional GPU count",
		page:    "gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"n\",pod=\"p\"} 1.5\n",
		wantErr: "agent page line 2 (gpu_agent_pod_gpus): GPU count 1.5 is not a count",
	}, {
		name:    "no value",
		page:    "gpu_agent_up{backend=\"nvml\"}\n",
		wantErr: "agent page line 1 (gpu_agent_up): missing value",
	}, {
		name:    "an escape the text format does not have",
		page:    "gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"n\\x\",pod=\"p\"} 1\n",
		wantErr: `agent page line 2 (gpu_agent_pod_gpus): invalid escape sequence \"x"`,
	}, {
		name:    "text after the timestamp",
		page:    "gpu_agent_up 1 1700000000000 junk\n",
		wantErr: `agent page line 1 (gpu_agent_up): unexpected text "junk" after timestamp`,
	}, {
		name:    "memory past float64's range is +Inf, refused",
		page:    "gpu_agent_up 1\ngpu_agent_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\",namespace=\"ns\",pod=\"p\"} 1e400\n",
		wantErr: "agent page line 2 (gpu_agent_gpu_memory_used_bytes): value +Inf out of range",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := agentpage.Parse([]byte(tt.page))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := agentpage.Parse([]byte("x 1\n")); !errors.Is(err, agentpage.ErrNotAgentPage) {
		t.Errorf("err %v is not ErrNotAgentPage", err)
	}
}

func TestPodGPUValue(t *testing.T) {
	p := pod("ns", "p", 1, 0.5, -1, 3)
	for _, tt := range []struct {
		s    catalog.Signal
		v    float64
		want bool
	}{{catalog.GPUUtilization, 0.5, true}, {catalog.GPUSMActive, 0, false}, {catalog.GPUMemoryUsedBytes, 3, true}, {catalog.QueueSize, 0, false}, {catalog.Count, 0, false}} {
		if v, ok := p.Value(tt.s); v != tt.v || ok != tt.want {
			t.Errorf("Value(%v) = %v, %v", tt.s, v, ok)
		}
	}
}

// busyPage is a full node: 8 GPUs, each shared by two pods.
func busyPage(t testing.TB) []byte {
	return agentPage(t, "h100-busy", func(s *podresourcestest.Server) {
		var pods []*podresourcesv1.PodResources
		for i := range 8 {
			pods = append(pods,
				podresourcestest.Pod("default", fmt.Sprintf("vllm-%d", i), "server", "nvidia.com/gpu", uuid("h100-busy", i)+"::0"),
				podresourcestest.Pod("other", fmt.Sprintf("job-%d", i), "main", "nvidia.com/gpu", uuid("h100-busy", i)+"::1"))
		}
		s.SetPods(pods...)
	})
}

func TestParseAllocs(t *testing.T) {
	page := busyPage(t)
	var p agentpage.Parser
	if _, err := p.Parse(page); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := p.Parse(page); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per page in steady state, want 0", allocs)
	}
}

// Side by side, as ratios to the bytes.Count floor: this parser, and the
// generic expfmt text parser most exporters use.
func BenchmarkParse(b *testing.B) {
	page := busyPage(b)
	b.Run("floor-bytes.Count", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			_ = bytes.Count(page, []byte{'\n'})
		}
	})
	b.Run("agentpage", func(b *testing.B) {
		var p agentpage.Parser
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Parse(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("expfmt", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			parser := expfmt.NewTextParser(model.UTF8Validation)
			if _, err := parser.TextToMetricFamilies(strings.NewReader(string(page))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A page's label values and values are read as pkg/adapter/parse reads a model
// server's: a label value is bounded, and an error quotes at most a few
// dozen bytes of the page. The agent page's own scanner once quoted a bad
// value whole, so one line of a page within the body size limit made an
// error (and every log line and status that repeats it) megabytes long.
func TestParseBoundsLabelsAndErrorText(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	tests := []struct {
		name    string
		page    string
		wantErr string
		limit   bool // the error is parse.ErrLimit
	}{
		{"a megabyte value", "gpu_agent_up " + long + "\n", `agent page line 1 (gpu_agent_up): invalid value "xxxxxxxx`, false},
		{"a megabyte timestamp", "gpu_agent_up 1 " + long + "\n", `agent page line 1 (gpu_agent_up): invalid timestamp "xxxxxxxx`, false},
		{"a megabyte label value", "gpu_agent_up{reason=\"" + long + "\"} 1\n", "agent page line 1 (gpu_agent_up): label value longer than 1024 bytes", true},
		{"a megabyte escaped label value", "gpu_agent_up{reason=\"\\n" + long + "\"} 1\n", "agent page line 1 (gpu_agent_up): label value longer than 1024 bytes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agentpage.Parse([]byte(tt.page))
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || len(err.Error()) > 200 {
				t.Fatalf("error %.300q, want one of at most 200 bytes starting %q", err, tt.wantErr)
			}
			if got := errors.Is(err, parse.ErrLimit); got != tt.limit {
				t.Errorf("errors.Is(err, parse.ErrLimit) = %v, want %v", got, tt.limit)
			}
		})
	}
	// A label value at the bound is read, escapes and all.
	name := strings.Repeat("a", 1023) + `\n`
	got, err := agentpage.Parse([]byte("gpu_agent_up 1\ngpu_agent_pod_gpus{namespace=\"" + name + "\",pod=\"p\"} 1\n"))
	if want := strings.Repeat("a", 1023) + "\n"; err != nil || len(got) != 1 || got[0].Namespace != want {
		t.Fatalf("a 1024-byte namespace: %v, %v", got, err)
	}
}
