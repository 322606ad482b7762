package loadgen

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
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
