// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseDist(t *testing.T) {
	tests := []struct {
		in      string
		want    Dist
		wantErr bool
	}{
		{"128", Fixed{N: 128}, false},
		{"fixed:7", Fixed{N: 7}, false},
		{"uniform:10:20", Uniform{Min: 10, Max: 20}, false},
		{"exp:50", Exponential{Mean: 50, Max: 500}, false},
		{"exp:50:80", Exponential{Mean: 50, Max: 80}, false},
		{"normal:100:10", Normal{Mean: 100, StdDev: 10}, false},
		{"uniform:20:10", nil, true},
		{"0", nil, true},
		{"zipf:3", nil, true},
		{"uniform:a:b", nil, true},
	}
	for _, tc := range tests {
		got, err := ParseDist(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseDist(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []Dist{Uniform{Min: 10, Max: 20}, Exponential{Mean: 5, Max: 9}, Normal{Mean: 3, StdDev: 5}} {
		for range 1000 {
			if v := d.Sample(r); v < 1 || v > 23 {
				t.Fatalf("%#v sampled %d", d, v)
			}
		}
	}
}

func TestParseSchedule(t *testing.T) {
	got, err := ParseSchedule("5:30s, 20:1m")
	if err != nil || len(got) != 2 || got[0] != (Phase{5, 30 * time.Second}) || got[1] != (Phase{20, time.Minute}) {
		t.Errorf("ParseSchedule = %v, %v", got, err)
	}
	for _, bad := range []string{"", "5", "x:1s", "5:0s", "-1:1s"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

func TestPlanIsPoissonAndDeterministic(t *testing.T) {
	cfg := Config{Schedule: []Phase{{Rate: 100, Duration: 10 * time.Second}, {Rate: 0, Duration: time.Second}, {Rate: 10, Duration: 10 * time.Second}},
		PromptLen: Fixed{N: 1}, OutputLen: Fixed{N: 1}, Seed: 9, TimeScale: 2}
	a, b := plan(cfg), plan(cfg)
	if len(a) != len(b) || a[0] != b[0] || a[len(a)-1] != b[len(b)-1] {
		t.Fatalf("plans differ for one seed")
	}
	first, second := 0, 0
	for _, x := range a {
		switch {
		case x.at < 5*time.Second: // 10 s of target time at time-scale 2
			first++
		case x.at >= 5500*time.Millisecond:
			second++
		default:
			t.Errorf("arrival at %v falls in the rate-0 phase", x.at)
		}
	}
	if first < 900 || first > 1100 || second < 70 || second > 130 {
		t.Errorf("arrivals per phase = %d, %d; want about 1000 and 100", first, second)
	}
}

func TestHasText(t *testing.T) {
	tests := map[string]bool{
		`{"choices":[{"index":0,"text":" the","finish_reason":null}]}`:     true,
		`{"choices":[{"index":0,"text":"","finish_reason":"length"}]}`:     false,
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`:        false,
		`{"choices":[{"delta":{"content": "hi"}}]}`:                        true,
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`: false,
	}
	for in, want := range tests {
		if got := hasText([]byte(in)); got != want {
			t.Errorf("hasText(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestRunRecordsFailuresAndTokens runs against plain net/http servers: one
// that streams two tokens, one that fails, one that never says [DONE].
func TestRunRecordsFailuresAndTokens(t *testing.T) {
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantOK    bool
		wantError string
	}{
		{"streams", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n"))
		}, true, ""},
		{"fails", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusBadRequest)
		}, false, "status 400"},
		{"truncated", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"))
		}, false, "without [DONE]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := Run(ctx, Config{URL: srv.URL, Model: "m", Endpoint: EndpointChat,
				Schedule: []Phase{{Rate: 200, Duration: 50 * time.Millisecond}}, PromptLen: Fixed{N: 8}, OutputLen: Fixed{N: 2},
				Seed: 1, TimeScale: 1, MaxInFlight: 100, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			s := Summarize(rep)
			if s.Sent == 0 {
				t.Fatalf("nothing sent")
			}
			if tc.wantOK && (s.Completed != s.Sent || s.Tokens != 2*s.Sent) {
				t.Errorf("summary %+v, want every request completed with 2 tokens", s)
			}
			if !tc.wantOK && (s.Failed != s.Sent || s.FirstError == nil || !strings.Contains(s.FirstError.Error(), tc.wantError)) {
				t.Errorf("summary %+v, want every request failed with %q", s, tc.wantError)
			}
			var out strings.Builder
			if err := s.Write(&out); err != nil || !strings.Contains(out.String(), "ttft") {
				t.Errorf("Write = %q, %v", out.String(), err)
			}
		})
	}
}

// TestRunRecordsDrops: arrivals beyond MaxInFlight are not sent; each is
// recorded with the time it was due (in the target's time), its lengths and
// its trace file (as is each result), so that a report can score it where
// it arrived and by the file it came from.
func TestRunRecordsDrops(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hold every request until all arrivals are due
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	trace := []TraceRequest{
		{At: 0, PromptTokens: 10, OutputTokens: 1},
		{At: 20 * time.Millisecond, PromptTokens: 11, OutputTokens: 1, Source: 1},
		{At: 40 * time.Millisecond, PromptTokens: 12, OutputTokens: 2, Source: 1},
		{At: 60 * time.Millisecond, PromptTokens: 13, OutputTokens: 3},
	}
	const timeScale = 2 // the wall clock runs at half the target's time
	go func() {
		time.Sleep(trace[len(trace)-1].At/timeScale + 100*time.Millisecond)
		close(release)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{URL: srv.URL, Model: "m", Endpoint: EndpointCompletions, Trace: trace,
		TimeScale: timeScale, MaxInFlight: 2, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []Drop{{At: 40 * time.Millisecond, PromptTokens: 12, MaxTokens: 2, Source: 1}, {At: 60 * time.Millisecond, PromptTokens: 13, MaxTokens: 3}}
	if len(rep.Drops) != len(want) {
		t.Fatalf("Drops %+v; want %d drops", rep.Drops, len(want))
	}
	for i, d := range rep.Drops {
		if d != want[i] {
			t.Errorf("drop %d: %+v, want %+v", i, d, want[i])
		}
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want the 2 requests sent", len(rep.Results))
	}
	// Each result keeps its trace request's source file.
	for i, r := range rep.Results {
		if r.PromptTokens != trace[i].PromptTokens || r.Source != trace[i].Source {
			t.Errorf("result %d: prompt %d source %d, want %d and %d", i, r.PromptTokens, r.Source, trace[i].PromptTokens, trace[i].Source)
		}
	}
}

// TestRunSendsPromptMix: with Config.Prompts every request carries one of
// the given texts and its max_tokens, for both endpoints.
func TestRunSendsPromptMix(t *testing.T) {
	prompts := []Prompt{{Text: "first prompt", MaxTokens: 3}, {Text: "second prompt, longer", MaxTokens: 5}}
	for _, endpoint := range []string{EndpointCompletions, EndpointChat} {
		t.Run(endpoint, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct {
					Prompt    string `json:"prompt"`
					MaxTokens int    `json:"max_tokens"`
					Messages  []struct {
						Content string `json:"content"`
					} `json:"messages"`
				}
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				text := body.Prompt
				if len(body.Messages) == 1 {
					text = body.Messages[0].Content
				}
				mu.Lock()
				got = append(got, fmt.Sprintf("%s/%d", text, body.MaxTokens))
				mu.Unlock()
				_, _ = w.Write([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"))
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rep, err := Run(ctx, Config{URL: srv.URL, Model: "m", Endpoint: endpoint,
				Schedule: []Phase{{Rate: 400, Duration: 100 * time.Millisecond}}, Prompts: prompts,
				Seed: 1, TimeScale: 1, MaxInFlight: 100, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if s := Summarize(rep); s.Completed == 0 || s.Failed > 0 {
				t.Fatalf("summary %+v", s)
			}
			seen := map[string]int{}
			for _, g := range got {
				seen[g]++
			}
			if len(seen) != 2 || seen["first prompt/3"] == 0 || seen["second prompt, longer/5"] == 0 {
				t.Errorf("requests sent %v, want both prompts with their max_tokens", seen)
			}
			for _, r := range rep.Results {
				if r.MaxTokens != 3 && r.MaxTokens != 5 {
					t.Errorf("result max tokens %d", r.MaxTokens)
				}
			}
		})
	}
	if err := (Config{URL: "http://x", Endpoint: EndpointChat, Schedule: []Phase{{1, time.Second}}, Prompts: []Prompt{{Text: "", MaxTokens: 1}},
		TimeScale: 1, MaxInFlight: 1, RequestTimeout: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "prompt 1") {
		t.Errorf("Validate of an empty prompt = %v", err)
	}
}

// TestNonFiniteRatesRejected: an infinite rate made plan loop forever
// (each gap is 0), a NaN rate sent nothing, and an infinite time scale
// overflowed the scaled latencies; all were accepted.
func TestNonFiniteRatesRejected(t *testing.T) {
	for _, s := range []string{"inf:10s", "+Inf:1s", "NaN:10s", "5:10s,inf:1s"} {
		if _, err := ParseSchedule(s); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", s)
		}
	}
	valid := Config{URL: "http://127.0.0.1:1", Endpoint: EndpointCompletions, PromptLen: Fixed{N: 1}, OutputLen: Fixed{N: 1},
		TimeScale: 1, MaxInFlight: 1, RequestTimeout: time.Second}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"valid", func(c *Config) { c.Schedule = []Phase{{Rate: 2, Duration: time.Second}} }, ""},
		{"idle phase", func(c *Config) { c.Schedule = []Phase{{Rate: 0, Duration: time.Second}} }, ""},
		{"infinite rate", func(c *Config) { c.Schedule = []Phase{{Rate: math.Inf(1), Duration: time.Second}} }, "rate"},
		{"NaN rate", func(c *Config) { c.Schedule = []Phase{{Rate: math.NaN(), Duration: time.Second}} }, "rate"},
		{"negative rate", func(c *Config) { c.Schedule = []Phase{{Rate: -1, Duration: time.Second}} }, "rate"},
		{"zero duration", func(c *Config) { c.Schedule = []Phase{{Rate: 1}} }, "duration"},
		{"infinite time scale", func(c *Config) {
			c.Schedule = []Phase{{Rate: 1, Duration: time.Second}}
			c.TimeScale = math.Inf(1)
		}, "time-scale"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			err := c.Validate()
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
