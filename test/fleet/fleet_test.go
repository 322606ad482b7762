// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func validOptions() options {
	o := newOptions("/bin")
	o.pods, o.trials, o.quiet, o.loadDuration = 10, 1, time.Second, time.Second
	return *o
}

func TestValidateMemoryLimit(t *testing.T) {
	tests := []struct {
		limit   string
		bytes   int64
		wantErr string
	}{
		{"", 0, ""},
		{"200Mi", 200 << 20, ""},
		{"1G", 1e9, ""},
		{"lots", 0, "--memory-limit \"lots\""},
		{"-1Mi", 0, "--memory-limit \"-1Mi\""},
		{"0", 0, "--memory-limit \"0\""},
	}
	for _, tt := range tests {
		t.Run(tt.limit, func(t *testing.T) {
			o := validOptions()
			o.memoryLimit = tt.limit
			err := o.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				if o.memoryLimitBytes != tt.bytes {
					t.Errorf("bytes = %d, want %d", o.memoryLimitBytes, tt.bytes)
				}
				if env := o.adapterEnv(); tt.bytes > 0 && (len(env) != 1 || env[0] != "MEMORY_LIMIT_BYTES="+strconv.FormatInt(tt.bytes, 10)) {
					t.Errorf("adapter env = %q", env)
				}
				o.adapterEnvVars = []string{"GOGC=50"}
				if env := o.adapterEnv(); len(env) == 0 || env[0] != "GOGC=50" {
					t.Errorf("adapter env with GOGC = %q", env)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("validate = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestPerAnswerSubtractsTheQuietRate(t *testing.T) {
	quiet := usage{window: 10 * time.Second, cpu: cpuByRole{roleAdapter: 2 * time.Second, roleAPIServer: 0}}
	run := latencyRun{answers: 100, elapsed: 5 * time.Second, cpu: cpuByRole{roleAdapter: 3 * time.Second, roleAPIServer: 200 * time.Millisecond}}
	// The adapter used 0.2 s/s while quiet: 1 s of the run's 3 s is scraping.
	if got, want := quiet.perAnswer(run, roleAdapter), 20*time.Millisecond; got != want {
		t.Errorf("adapter per answer = %s, want %s", got, want)
	}
	if got, want := quiet.perAnswer(run, roleAPIServer), 2*time.Millisecond; got != want {
		t.Errorf("kube-apiserver per answer = %s, want %s", got, want)
	}
	if got := quiet.perAnswer(latencyRun{}, roleAdapter); got != 0 {
		t.Errorf("no answers: %s, want 0", got)
	}
}

func TestBusyShare(t *testing.T) {
	cores := time.Duration(runtime.NumCPU())
	u := usage{window: 10 * time.Second, cpu: cpuByRole{roleAdapter: cores * 3 * time.Second, roleFleet: cores * 5 * time.Second}}
	if got := u.busyShare(); got < 0.799 || got > 0.801 {
		t.Errorf("busyShare = %.3f, want 0.8", got)
	}
	if got := (usage{}).busyShare(); got != 0 {
		t.Errorf("busyShare of no window = %v, want 0", got)
	}
	if got, want := u.cores(roleFleet), 0.5*float64(cores); got != want {
		t.Errorf("cores = %v, want %v", got, want)
	}
	if (usage{}).cores(roleAdapter) != 0 || (usage{}).perScrape(roleAdapter) != 0 {
		t.Error("an empty window has CPU per scrape or cores")
	}
}

func TestParseMemory(t *testing.T) {
	status := "Name:\tinference-metr\nVmHWM:\t  230000 kB\nVmRSS:\t  217088 kB\nRssAnon:\t  180224 kB\nRssFile:\t   36864 kB\nRssShmem:\t       0 kB\n"
	m, err := parseMemory(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := (memory{rss: 217088 << 10, hwm: 230000 << 10, anon: 180224 << 10, file: 36864 << 10}); m != want {
		t.Errorf("parseMemory = %+v, want %+v", m, want)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t lots kB\n"} {
		if _, err := parseMemory(bad); err == nil {
			t.Errorf("parseMemory(%q): no error", bad)
		}
	}
}

func TestParseStolen(t *testing.T) {
	stat := "cpu  596137 8598 181229 1151787 127002 0 25074 14583 0 0\ncpu0 298000 4000 90000 575000 63000 0 12000 7300 0 0\n"
	got, err := parseStolen(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 145830 * time.Millisecond; got != want {
		t.Errorf("parseStolen = %s, want %s", got, want)
	}
	if got, want := stolenShare(time.Duration(runtime.NumCPU())*300*time.Millisecond, time.Second), "30%"; got != want {
		t.Errorf("stolenShare = %s, want %s", got, want)
	}
	if got := stolenShare(time.Second, 0); got != "n/a" {
		t.Errorf("stolenShare over no window = %s, want n/a", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7\n", "cpu 1 2 3 4 5 6 7 x\n", "cpu 1 2 3 4 5 6 7 -1\n"} {
		if _, err := parseStolen(bad); err == nil {
			t.Errorf("parseStolen(%q): no error", bad)
		}
	}
}

func TestValidateAdapterEnv(t *testing.T) {
	for _, tt := range []struct {
		env []string
		ok  bool
	}{{[]string{"GOGC=50", "GODEBUG=gctrace=1"}, true}, {[]string{"GOGC"}, false}, {[]string{"=1"}, false}} {
		o := validOptions()
		o.adapterEnvFlag = strings.Join(tt.env, " ")
		if err := o.validate(); (err == nil) != tt.ok {
			t.Errorf("validate with --adapter-env %q: %v", tt.env, err)
		}
	}
}

// TestQuestions: the latency runs ask the N-pod list through the custom
// metrics API and the sum over the same pods through the external metrics
// API, both for the fleet's pods, the floor from kube-apiserver's own
// cache, and the N-pod list again of the adapter directly; the tables
// tell them apart.
func TestQuestions(t *testing.T) {
	sel := map[string]string{"labelSelector": "app=fleet"}
	for _, tc := range []struct {
		q        question
		path     string
		params   map[string]string
		describe string
	}{
		{questionList, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/fleet/pods/*/inference_queue_size", sel, "1000-pod list"},
		{questionSum, "/apis/external.metrics.k8s.io/v1beta1/namespaces/fleet/inference_queue_size", sel, "sum over 1000 pods (external)"},
		{questionFloor, "/api/v1/namespaces/fleet", map[string]string{"resourceVersion": "0"}, "floor: kube-apiserver alone (a cached Namespace)"},
		{questionDirect, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/fleet/pods/*/inference_queue_size", sel, "1000-pod list, the adapter alone (asked directly)"},
	} {
		if got := tc.q.path(); got != tc.path {
			t.Errorf("%s: path %q, want %q", tc.q, got, tc.path)
		}
		if got := tc.q.params(); !maps.Equal(got, tc.params) {
			t.Errorf("%s: params %v, want %v", tc.q, got, tc.params)
		}
		if got := tc.q.describe(1000); got != tc.describe {
			t.Errorf("%s: described as %q, want %q", tc.q, got, tc.describe)
		}
	}
	if want := []question{questionList, questionSum, questionFloor, questionDirect}; !slices.Equal(questions, want) {
		t.Errorf("questions %v, want %v", questions, want)
	}
}

func TestValidatePace(t *testing.T) {
	for _, tc := range []struct {
		pace    time.Duration
		wantErr bool
	}{
		{0, false},
		{100 * time.Millisecond, false},
		{-time.Millisecond, true},
		{time.Second, true}, // not shorter than --load-duration (1s)
	} {
		o := validOptions()
		o.pace = tc.pace
		if err := o.validate(); (err != nil) != tc.wantErr {
			t.Errorf("--pace %s: error %v, want an error: %v", tc.pace, err, tc.wantErr)
		}
	}
}

// TestJudge: each goal is judged only by a run of the fleet size and
// interval it is stated for, from what the run measured, and the list's
// p99 is given with the adapter's alone and the floor's of the same
// encoding and clients.
func TestJudge(t *testing.T) {
	quiet := usage{window: 10 * time.Second, cpu: cpuByRole{roleAdapter: 800 * time.Millisecond}, scrapes: []int64{5000, 5000}}
	small := &results{
		quiet:     quiet, // 0.08 ms per pod-scrape
		mem:       memory{rss: 98 << 20},
		freshness: []time.Duration{500 * time.Millisecond, 900 * time.Millisecond, 1600 * time.Millisecond},
		latency: []latencyRun{
			{question: questionList, encoding: encodingProtobuf, clients: 10, answers: 100, p99: 30 * time.Millisecond},
			{question: questionList, encoding: encodingProtobuf, clients: 1, answers: 100, p99: 5 * time.Millisecond},
			{question: questionFloor, encoding: encodingProtobuf, clients: 10, answers: 100, p99: 15 * time.Millisecond},
			{question: questionList, encoding: encodingJSON, clients: 10, answers: 100, p99: 9 * time.Millisecond},
			{question: questionDirect, encoding: encodingProtobuf, clients: 10, answers: 100, p99: 7 * time.Millisecond},
			{question: questionDirect, encoding: encodingProtobuf, clients: 1, answers: 100, p99: 2 * time.Millisecond},
			{question: questionDirect, encoding: encodingJSON, clients: 10, answers: 0}, // none answered: not shown
		},
	}
	large := &results{quiet: usage{window: 10 * time.Second, cpu: cpuByRole{roleAdapter: 12 * time.Second}, scrapes: []int64{100000}}, mem: memory{rss: 190 << 20}}
	o1k := options{pods: 1000, interval: time.Second}
	o10k := options{pods: 10000, interval: time.Second}
	o1k5s := options{pods: 1000, interval: 5 * time.Second}
	for _, tc := range []struct {
		name string
		r    *results
		o    options
		want []verdict
	}{
		{"1,000 pods at 1 s", small, o1k, []verdict{
			{"1,000 pods at 1 s: a change visible within 1.5 s (p90)", "1.60 s", false},
			{"at most 0.1 ms of adapter CPU per pod-scrape", "0.080 ms", true},
			{"1,000 pods at 1 s: at most 100 MB (VmRSS)", "98 MB", true},
			{"the 1,000-pod list within 10 ms p99 with 10 clients (protobuf, no gzip)", "30.0 ms, back to back; the adapter alone (asked directly) 7.0 ms; the floor (kube-apiserver alone) 15.0 ms", false},
			{"the 1,000-pod list within 10 ms p99 with 10 clients (json, gzip accepted)", "9.0 ms, back to back", true},
		}},
		{"1,000 pods at 5 s: only the per-scrape goal and the list", small, o1k5s, []verdict{
			{"at most 0.1 ms of adapter CPU per pod-scrape", "0.080 ms", true},
			{"the 1,000-pod list within 10 ms p99 with 10 clients (protobuf, no gzip)", "30.0 ms, back to back; the adapter alone (asked directly) 7.0 ms; the floor (kube-apiserver alone) 15.0 ms", false},
			{"the 1,000-pod list within 10 ms p99 with 10 clients (json, gzip accepted)", "9.0 ms, back to back", true},
		}},
		{"10,000 pods at 1 s", large, o10k, []verdict{
			{"at most 0.1 ms of adapter CPU per pod-scrape", "0.120 ms", false},
			{"10,000 pods at 1 s on at most 1 core", "1.20 cores", false},
			{"10,000 pods at 1 s in at most 200 MB (VmRSS)", "190 MB", true},
		}},
		{"nothing measured", &results{}, o1k, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(tc.r, tc.o)
			if !slices.Equal(got, tc.want) {
				t.Errorf("judge =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestPrintGoals(t *testing.T) {
	var b strings.Builder
	printGoals(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no verdicts printed %q", b.String())
	}
	printGoals(&b, []verdict{{"g1", "1 ms", true}, {"g2", "2 ms", false}})
	for _, want := range []string{"| g1 | 1 ms | yes |", "| g2 | 2 ms | no |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed %q, want a row %q", b.String(), want)
		}
	}
}
