// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// frontDoorPage is what one /metrics page of a front door says: the
// family names (by the Prometheus text parser) and the adapter's reading
// of it.
type frontDoorPage struct {
	body     string
	families []string
	pending  float64
	running  float64
	fill     float64
	hasFill  bool
}

func readFrontDoorPage(t *testing.T, base string) frontDoorPage {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the page is not the text format: %v\n%s", err, body)
	}
	out := frontDoorPage{body: string(body)}
	for name := range fams {
		out.families = append(out.families, name)
	}
	slices.Sort(out.families)
	pg, err := parse.NewParser().Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Server != parse.GIEEPP {
		t.Fatalf("the page parses as %v, want gie-epp:\n%s", pg.Server, body)
	}
	for _, m := range pg.Models {
		switch m.Name {
		case "m":
			out.pending, _ = m.Value(catalog.QueueSize)
			out.running, _ = m.Value(catalog.BatchSize)
		case "": // the pool's
			out.fill, out.hasFill = m.Value(catalog.BatchFill)
		default:
			t.Fatalf("model %q on the page, want m only:\n%s", m.Name, body)
		}
	}
	return out
}

// TestFrontDoorMetricNames: under each Names the page carries the held
// requests, the requests in flight and the pool saturation under that
// endpoint picker's names and no other's, in the text format, and the
// adapter's parser reads the same values from it: held while the backend
// is unhealthy (the empty pool saturated, 1), in flight once dispatched
// (in flight over SaturationAt), 0 when answered.
func TestFrontDoorMetricNames(t *testing.T) {
	deprecated := []string{"inference_extension_flow_control_pool_saturation", "inference_extension_flow_control_queue_size", "inference_objective_running_requests"}
	current := []string{"llm_d_epp_flow_control_pool_saturation", "llm_d_epp_flow_control_queue_size", "llm_d_epp_request_running"}
	tests := []struct {
		names    string
		families []string
	}{
		{"", deprecated},
		{NamesDeprecated, deprecated},
		{NamesCurrent, current},
		{NamesBoth, append(slices.Clone(deprecated), current...)},
	}
	for _, tc := range tests {
		t.Run("names="+tc.names, func(t *testing.T) {
			var healthy atomic.Bool
			release := make(chan struct{})
			var arrived atomic.Int64
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					if !healthy.Load() {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
					return
				}
				arrived.Add(1)
				<-release
				_, _ = io.WriteString(w, "served")
			}))
			t.Cleanup(backend.Close)
			f, base := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: time.Minute,
				ProbeEvery: 10 * time.Millisecond, Names: tc.names, SaturationAt: 4})

			const n = 2
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"m"}`))
					if err != nil {
						t.Errorf("request: %v", err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("request: %d, want 200", resp.StatusCode)
					}
				})
			}
			waitPending(t, f, n)
			check := func(when string, pending, running, fill float64) {
				t.Helper()
				pg := readFrontDoorPage(t, base)
				if !slices.Equal(pg.families, tc.families) {
					t.Errorf("%s: families %v, want %v:\n%s", when, pg.families, tc.families, pg.body)
				}
				if pg.pending != pending || pg.running != running || !pg.hasFill || pg.fill != fill {
					t.Errorf("%s: read held %v, in flight %v, saturation %v (%v); want %v, %v, %v:\n%s", when, pg.pending, pg.running, pg.fill, pg.hasFill, pending, running, fill, pg.body)
				}
				if tc.names == NamesBoth && !strings.Contains(pg.body, "# HELP inference_extension_flow_control_queue_size [ALPHA] [Deprecated: Use llm_d_epp_flow_control_queue_size]") {
					t.Errorf("%s: the deprecated queue family does not name its replacement:\n%s", when, pg.body)
				}
			}
			check("held, no healthy backend", n, 0, 1)

			healthy.Store(true)
			if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return arrived.Load() == n && f.Running() == n, nil
			}); err != nil {
				t.Fatalf("%d requests reached the backend, %d in flight; want %d", arrived.Load(), f.Running(), n)
			}
			check("dispatched", 0, n, float64(n)/4)
			close(release)
			wg.Wait()
			// The client may have its answer a moment before the handler
			// returns and the request stops counting.
			if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return f.Running() == 0, nil
			}); err != nil {
				t.Fatalf("%d requests still in flight after every answer", f.Running())
			}
			check("answered", 0, 0, 0)
		})
	}
}

// TestFrontDoorWithoutSaturation: without a SaturationAt no saturation
// series is published under any names, as an endpoint picker without
// flow control; the held and in-flight ones still are.
func TestFrontDoorWithoutSaturation(t *testing.T) {
	var healthy atomic.Bool
	backend := fakeBackend(t, &healthy)
	for _, names := range FrontDoorNames {
		t.Run(names, func(t *testing.T) {
			_, base := startFrontDoor(t, FrontDoorConfig{Backend: backend.URL, Model: "m", Pool: "p", MaxHold: time.Minute, ProbeEvery: 10 * time.Millisecond, Names: names})
			pg := readFrontDoorPage(t, base)
			if pg.hasFill || strings.Contains(pg.body, "saturation") {
				t.Errorf("a saturation without SaturationAt:\n%s", pg.body)
			}
			if len(pg.families) == 0 || !strings.Contains(pg.body, "queue_size") || !strings.Contains(pg.body, "running") {
				t.Errorf("the held or in-flight requests are missing:\n%s", pg.body)
			}
		})
	}
}
