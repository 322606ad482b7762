// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"strings"
	"testing"
	"time"
)

func TestReadTrace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []TraceRequest
		wantErr string
	}{
		{
			name: "azure columns",
			in: "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
				"2023-11-16 18:17:03.9799600,4808,10\n" +
				"2023-11-16 18:17:04.0319600,3180,8\n" +
				"2023-11-16 18:17:05.9799600,110,27\n",
			want: []TraceRequest{{0, 4808, 10}, {52 * time.Millisecond, 3180, 8}, {2 * time.Second, 110, 27}},
		},
		{
			name: "columns in another order, extra column",
			in:   "GeneratedTokens,Other,TIMESTAMP,ContextTokens\n5,x,2023-11-16 00:00:00,7\n",
			want: []TraceRequest{{0, 7, 5}},
		},
		{name: "missing column", in: "TIMESTAMP,ContextTokens\n", wantErr: "lacks [GeneratedTokens]"},
		{name: "empty", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n", wantErr: "no requests"},
		{name: "out of order", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:01,1,1\n2023-11-16 00:00:00,1,1\n", wantErr: "line 3: TIMESTAMP"},
		{name: "zero output", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:01,1,0\n", wantErr: "at least 1 token"},
		{name: "bad number", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 00:00:01,x,1\n", wantErr: "line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTrace(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d requests, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("request %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestReadTraceFiles reads the repository's two traces and checks their
// row counts and spans against testdata/traces/README.md.
func TestReadTraceFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		rows int
		span time.Duration
	}{
		{"azure-llm-2023-code.csv.gz", 8819, 3436 * time.Second},
		{"azure-llm-2023-conv.csv.gz", 19366, 3502 * time.Second},
	} {
		reqs, err := ReadTraceFile("../../../testdata/traces/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		span := reqs[len(reqs)-1].At
		if len(reqs) != tc.rows || span < tc.span-time.Second || span > tc.span+time.Second {
			t.Errorf("%s: %d rows over %s, want %d over %s", tc.file, len(reqs), span, tc.rows, tc.span)
		}
	}
}

// TestPlanFollowsTrace: a trace's requests are planned at their times,
// divided by the time scale, with their lengths.
func TestPlanFollowsTrace(t *testing.T) {
	cfg := Config{TimeScale: 4, Trace: []TraceRequest{{0, 10, 2}, {4 * time.Second, 20, 3}}}
	got := plan(cfg)
	want := []arrival{{at: 0, prompt: 10, output: 2}, {at: time.Second, prompt: 20, output: 3}}
	if len(got) != len(want) {
		t.Fatalf("planned %d arrivals, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("arrival %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
