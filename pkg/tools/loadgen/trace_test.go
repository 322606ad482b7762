// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
			want: []TraceRequest{{0, 4808, 10, 0}, {52 * time.Millisecond, 3180, 8, 0}, {2 * time.Second, 110, 27, 0}},
		},
		{
			name: "columns in another order, extra column",
			in:   "GeneratedTokens,Other,TIMESTAMP,ContextTokens\n5,x,2023-11-16 00:00:00,7\n",
			want: []TraceRequest{{0, 7, 5, 0}},
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

// TestReadMergedTraceFiles: traces merge by their TIMESTAMPs, offsets kept,
// ties in the order of the files; a bad file is named.
func TestReadMergedTraceFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.csv", "2023-11-16 18:00:02.0,1,1\n2023-11-16 18:00:04.0,2,2\n")
	b := write("b.csv", "2023-11-16 18:00:01.0,3,3\n2023-11-16 18:00:02.0,4,4\n2023-11-16 18:00:09.5,5,5\n")
	bad := write("bad.csv", "2023-11-16 18:00:01.0,0,3\n")
	later := write("later.csv", "2023-11-16 18:00:10.0,6,6\n")
	inner := write("inner.csv", "2023-11-16 18:00:05.0,7,7\n")
	for _, tc := range []struct {
		name    string
		paths   []string
		want    []TraceRequest
		wantErr string
	}{
		{"one file is read as it is", []string{a}, []TraceRequest{{0, 1, 1, 0}, {2 * time.Second, 2, 2, 0}}, ""},
		{"the later file is offset by its start", []string{a, b}, []TraceRequest{
			{0, 3, 3, 1}, {time.Second, 1, 1, 0}, {time.Second, 4, 4, 1}, {3 * time.Second, 2, 2, 0}, {8500 * time.Millisecond, 5, 5, 1},
		}, ""},
		{"ties keep the order of the files", []string{b, a}, []TraceRequest{
			{0, 3, 3, 0}, {time.Second, 4, 4, 0}, {time.Second, 1, 1, 1}, {3 * time.Second, 2, 2, 1}, {8500 * time.Millisecond, 5, 5, 0},
		}, ""},
		{"a bad file is named", []string{a, bad}, nil, "bad.csv"},
		{"a file that starts after the others end", []string{a, b, later}, nil, "later.csv (2023-11-16 18:00:10 to 2023-11-16 18:00:10) starts after every earlier file has ended (2023-11-16 18:00:09.5)"},
		{"a file inside another's span, after a third has ended, is kept", []string{a, b, inner}, []TraceRequest{
			{0, 3, 3, 1}, {time.Second, 1, 1, 0}, {time.Second, 4, 4, 1}, {3 * time.Second, 2, 2, 0}, {4 * time.Second, 7, 7, 2}, {8500 * time.Millisecond, 5, 5, 1},
		}, ""},
		{"a missing file", []string{a, filepath.Join(dir, "none.csv")}, nil, "none.csv"},
		{"no file", nil, nil, "no trace file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadMergedTraceFiles(tc.paths...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("merged trace (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMergeRepositoryTraces: the repository's two traces were recorded over
// the same hour; merged, they hold both files' rows, the conv trace's first
// request first and the code trace's 77.3 s later.
func TestMergeRepositoryTraces(t *testing.T) {
	const dir = "../../../testdata/traces/"
	reqs, err := ReadMergedTraceFiles(dir+"azure-llm-2023-code.csv.gz", dir+"azure-llm-2023-conv.csv.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 8819+19366 {
		t.Errorf("%d rows, want %d", len(reqs), 8819+19366)
	}
	if span := reqs[len(reqs)-1].At; span < 3513*time.Second || span > 3514*time.Second {
		t.Errorf("span %s, want 18:15:46.68 to 19:14:19.93 (3,513.2 s)", span)
	}
	if r := reqs[0]; r != (TraceRequest{0, 374, 44, 1}) {
		t.Errorf("first request %+v, want the conv trace's first (374 and 44 tokens at 0)", r)
	}
	for i := 1; i < len(reqs); i++ {
		if reqs[i].At < reqs[i-1].At {
			t.Fatalf("request %d at %s before request %d at %s", i, reqs[i].At, i-1, reqs[i-1].At)
		}
	}
	code, err := ReadTraceFile(dir + "azure-llm-2023-code.csv.gz")
	if err != nil {
		t.Fatal(err)
	}
	const offset = 77299370 * time.Microsecond // 18:17:03.9799600 − 18:15:46.6805900
	for _, r := range reqs {
		if r.PromptTokens == code[0].PromptTokens && r.OutputTokens == code[0].OutputTokens && r.At == offset {
			return
		}
	}
	t.Errorf("the code trace's first request (%d and %d tokens) is not at %s", code[0].PromptTokens, code[0].OutputTokens, offset)
}

// TestPlanFollowsTrace: a trace's requests are planned at their times,
// divided by the time scale, with their lengths.
func TestPlanFollowsTrace(t *testing.T) {
	cfg := Config{TimeScale: 4, Trace: []TraceRequest{{0, 10, 2, 0}, {4 * time.Second, 20, 3, 0}}}
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
