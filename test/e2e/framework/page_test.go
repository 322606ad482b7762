// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestGetPageAndMetricFamilies(t *testing.T) {
	const page = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"a\"} 3\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			_, _ = w.Write([]byte(page))
		case "/huge":
			_, _ = w.Write([]byte(strings.Repeat("x", MaxPage+1)))
		case "/garbage":
			_, _ = w.Write([]byte("vllm:num_requests_waiting{ 3\n"))
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tc := range []struct {
		path, wantErr string
	}{
		{path: "/metrics"},
		{path: "/missing", wantErr: "404 Not Found: no such page"},
		{path: "/huge", wantErr: "longer than"},
		{path: "/garbage", wantErr: "parse"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			fams, err := MetricFamilies(ctx, nil, srv.URL+tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := fams["vllm:num_requests_waiting"]
			if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 3 {
				t.Fatalf("families = %v, want the gauge at 3", fams)
			}
			body, err := GetPage(ctx, srv.Client(), srv.URL+tc.path)
			if err != nil || string(body) != page {
				t.Fatalf("GetPage = %q, %v; want the page", body, err)
			}
		})
	}
}
