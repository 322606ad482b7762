// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// serveOpenCost answers /allocation with body and status, recording the
// query it was asked.
func serveOpenCost(t *testing.T, status int, body string) (*OpenCost, *string) {
	t.Helper()
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/allocation" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &OpenCost{URL: srv.URL + "/", Window: "1h", Client: &http.Client{Timeout: 5 * time.Second}}, &query
}

func TestOpenCostDeploymentCosts(t *testing.T) {
	recorded, err := os.ReadFile("testdata/opencost-allocation.json")
	if err != nil {
		t.Fatal(err)
	}
	oc, query := serveOpenCost(t, http.StatusOK, string(recorded))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := oc.DeploymentCosts(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"window=1h", "aggregate=namespace%2CcontrollerKind%2Ccontroller", "accumulate=true"} {
		if !strings.Contains(*query, want) {
			t.Errorf("query %q lacks %s", *query, want)
		}
	}
	want := map[string]float64{
		"llm":       7.2 / 3600, // totalCost over 60 minutes
		"half-hour": 1.8 / 1800, // over the 30 minutes it ran
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want exactly %v (not the StatefulSet, not team-b's, not a Deployment without running time, not __idle__)", got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || math.Abs(g-w) > 1e-12 {
			t.Errorf("%s: got %v (present %v), want %v per second", name, g, ok, w)
		}
	}
}

func TestOpenCostErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"HTTP error", http.StatusInternalServerError, `{"code":500,"message":"boom"}`, `HTTP 500 "Internal Server Error"`},
		{"error code in the body", http.StatusOK, `{"code":400,"message":"bad window"}`, `code 400: "bad window"`},
		{"not JSON", http.StatusOK, `<html>`, "not an allocation answer"},
		{"too large", http.StatusOK, `{"code":200,"data":[{"x":{"name":"` + strings.Repeat("a", maxOpenCostBody) + `"}}]}`, "over 32 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc, _ := serveOpenCost(t, tc.status, tc.body)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := oc.DeploymentCosts(ctx, "team-a")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, %v; want an error with %q", got, err, tc.wantErr)
			}
		})
	}
	// Nothing listening.
	oc := &OpenCost{URL: "http://127.0.0.1:1", Window: "1h"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := oc.DeploymentCosts(ctx, "team-a"); err == nil {
		t.Error("no error from an OpenCost that is not there")
	}
}

func TestPriceAt(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	s := Summary{SLOMetRequestsPerSecond: &Range{Min: f(9), Max: f(10)}}
	s.PriceAt(0.002) // 7.2 per hour
	if s.CostPer1000SLOMetRequests == nil || math.Abs(*s.CostPer1000SLOMetRequests.Min-0.2) > 1e-9 || math.Abs(*s.CostPer1000SLOMetRequests.Max-0.002/9*1000) > 1e-9 {
		t.Errorf("cost %+v, want 0.2 to 0.222 per 1,000", s.CostPer1000SLOMetRequests)
	}
	none := Summary{}
	none.PriceAt(0.002)
	if none.CostPer1000SLOMetRequests != nil {
		t.Error("a cost without SLO-meeting requests per second; want none")
	}
}

// TestOpenCostErrorsEscapeControlCharacters: OpenCost's error text reaches
// the terminal: escaped, and its message cut short like the body.
func TestOpenCostErrorsEscapeControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"HTTP error", http.StatusBadGateway, "\x1b]0;pwned\x07\x1b[2Jbad gateway"},
		{"error code in the body", http.StatusOK, `{"code":400,"message":"\u001b]0;pwned\u0007\u001b[2Jbad window"}`},
		{"long message", http.StatusOK, `{"code":400,"message":"` + strings.Repeat("a", 1<<20) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc, _ := serveOpenCost(t, tc.status, tc.body)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := oc.DeploymentCosts(ctx, "team-a")
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07") || len(msg) > 1024 {
				t.Errorf("error has control characters or is over 1 KiB (%d bytes): %.300q", len(msg), msg)
			}
		})
	}
}
