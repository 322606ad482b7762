// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		want   float64
		ok     bool
	}{
		{"flat", []float64{0, 1, 2, 3}, []float64{5, 5, 5, 5}, 0, true},
		{"rising", []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}, 2, true},
		{"falling noisy", []float64{0, 1, 2}, []float64{4, 3.5, 2}, -1, true},
		{"too few", []float64{0, 1}, []float64{0, 1}, 0, false},
		{"no spread", []float64{1, 1, 1}, []float64{0, 1, 2}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := slope(tc.xs, tc.ys)
			if ok != tc.ok || ok && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("slope = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// samples makes one sample every sampleEvery for d, of pid, with f(minutes)
// goroutines, RSS in MiB and log lines.
func samples(start time.Time, pid int, d time.Duration, f func(m float64) (g, rssMiB float64, lines int)) []sample {
	var out []sample
	for at := time.Duration(0); at <= d; at += sampleEvery {
		g, rss, lines := f(at.Minutes())
		out = append(out, sample{at: start.Add(at), pid: pid, goroutines: g, rss: int64(rss * (1 << 20)), logLines: lines})
	}
	return out
}

func TestLifetimes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	flat := func(m float64) (float64, float64, int) { return 150, 100, int(10 * m) }
	leak := func(m float64) (float64, float64, int) { return 150 + 5*m, 100 + 3*m, int(10 * m) }
	for _, tc := range []struct {
		name     string
		replicas [][]sample
		want     []lifetime // replica, pid, judged and the slopes (rounded)
	}{
		{
			name:     "flat long lifetime is judged",
			replicas: [][]sample{samples(t0, 1, 10*time.Minute, flat)},
			want:     []lifetime{{replica: 0, pid: 1, judged: true, rssSlope: 0, gorSlope: 0}},
		},
		{
			name:     "leak is measured per minute",
			replicas: [][]sample{samples(t0, 1, 10*time.Minute, leak)},
			want:     []lifetime{{replica: 0, pid: 1, judged: true, rssSlope: 3 << 20, gorSlope: 5}},
		},
		{
			name: "a restart splits the lifetimes; a short one is not judged",
			replicas: [][]sample{append(samples(t0, 1, 8*time.Minute, flat),
				samples(t0.Add(9*time.Minute), 2, 3*time.Minute, leak)...)},
			want: []lifetime{{replica: 0, pid: 1, judged: true}, {replica: 0, pid: 2, judged: false, rssSlope: 3 << 20, gorSlope: 5}},
		},
		{
			name:     "shorter than the warm-up: nothing fitted",
			replicas: [][]sample{samples(t0, 1, 50*time.Second, flat)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lifetimes(tc.replicas)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d lifetimes, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.replica != w.replica || g.pid != w.pid || g.judged != w.judged ||
					math.Abs(g.rssSlope-w.rssSlope) > 1 || math.Abs(g.gorSlope-w.gorSlope) > 1e-6 {
					t.Errorf("lifetime %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestLogRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	quiet := samples(t0, 1, 5*time.Minute, func(m float64) (float64, float64, int) { return 1, 1, int(20 * m) })
	burst := samples(t0, 2, 5*time.Minute, func(m float64) (float64, float64, int) {
		if m < 2 {
			return 1, 1, 0
		}
		return 1, 1, 500 // 500 lines at once in minute 2
	})
	lines, replica, ok := logRate([][]sample{quiet, burst})
	if !ok || replica != 1 || lines != 500 {
		t.Errorf("logRate = %d lines (replica %d, ok %v), want 500 from replica 1", lines, replica, ok)
	}
	if _, _, ok := logRate([][]sample{samples(t0, 1, 30*time.Second, func(float64) (float64, float64, int) { return 1, 1, 1 })}); ok {
		t.Error("logRate over 30s of samples: ok, want no full minute")
	}
}

func TestGaugeValue(t *testing.T) {
	page := "# TYPE go_goroutines gauge\ngo_goroutines_total 3\ngo_goroutines 171\ngo_threads 9\n"
	if v, err := gaugeValue(strings.NewReader(page), "go_goroutines"); err != nil || v != 171 {
		t.Errorf("gaugeValue = %v, %v; want 171", v, err)
	}
	if _, err := gaugeValue(strings.NewReader("go_threads 9\n"), "go_goroutines"); err == nil {
		t.Error("gaugeValue without the sample: no error")
	}
}

func TestValueForNeverZero(t *testing.T) {
	seen := map[int64]bool{}
	for i := range 2000 {
		v := valueFor(fmt.Sprintf("uid-%d", i))
		if v < 1 || v > 9999 {
			t.Fatalf("valueFor = %d, want 1..9999", v)
		}
		seen[v] = true
	}
	if len(seen) < 1500 {
		t.Errorf("only %d distinct values for 2000 UIDs", len(seen))
	}
}

// TestJudge feeds answers to the checker's rules and expects exactly the
// violations each should raise.
func TestJudge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ip := netip.MustParseAddr("127.4.0.20")
	newReg := func() *registry {
		r := newRegistry()
		r.add("stable-0", netip.MustParseAddr("127.4.0.2"), 7)
		r.add("old", ip, 11) // held ip first
		r.add("new", ip, 22) // then new, on the reused ip
		r.add("victim", netip.MustParseAddr("127.4.0.3"), 33)
		r.stable = []string{"stable-0"}
		r.breakPage("victim", t0)
		r.add("mended", netip.MustParseAddr("127.4.0.4"), 44)
		r.breakPage("mended", t0)
		r.mendPage("mended", t0.Add(pageBroken))
		return r
	}
	pastMaxAge := t0.Add(maxAge + staleSlack + time.Second)
	for _, tc := range []struct {
		name        string
		at          time.Time
		took        time.Duration // 100ms when zero
		values      map[string]float64
		wantKinds   []string
		wantHealthy bool
	}{
		{"all own values", t0, 0, map[string]float64{"stable-0": 7, "old": 11, "new": 22}, nil, true},
		{"missing stable pod is unhealthy, not a violation", t0, 0, map[string]float64{"new": 22}, nil, false},
		{"new pod with the old pod's value", t0, 0, map[string]float64{"stable-0": 7, "new": 11}, []string{vInherited}, true},
		{"old pod with the new pod's value", t0, 0, map[string]float64{"stable-0": 7, "old": 22}, []string{vOccupant}, true},
		{"zero", t0, 0, map[string]float64{"stable-0": 7, "new": 0}, []string{vZero}, true},
		{"foreign pod", t0, 0, map[string]float64{"stable-0": 7, "ghost": 5}, []string{vForeign}, true},
		{"wrong stable value", t0, 0, map[string]float64{"stable-0": 8}, []string{vWrong}, false},
		{"broken page within max-age", t0.Add(maxAge), 0, map[string]float64{"stable-0": 7, "victim": 33}, nil, true},
		{"broken page past max-age", pastMaxAge, 0, map[string]float64{"stable-0": 7, "victim": 33}, []string{vStale}, true},
		{"broken page past max-age, a slow answer still before the mending", pastMaxAge, pageBroken - maxAge - staleSlack - 2*time.Second, map[string]float64{"stable-0": 7, "mended": 44}, []string{vStale}, true},
		// The answer arrived after the page was mended: its value may come
		// from a scrape of the mended page.
		{"broken page past max-age, answered after the mending", pastMaxAge, pageBroken, map[string]float64{"stable-0": 7, "mended": 44}, nil, true},
		{"mended page", t0.Add(pageBroken), 0, map[string]float64{"stable-0": 7, "mended": 44}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &timeline{}
			took := cmp.Or(tc.took, 100*time.Millisecond)
			a := judge(newReg(), tl, answer{start: tc.at, end: tc.at.Add(took), values: tc.values})
			var kinds []string
			for _, v := range tl.violations {
				kinds = append(kinds, v.kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.wantKinds) {
				t.Errorf("violations %q, want %q", kinds, tc.wantKinds)
			}
			if a.healthy != tc.wantHealthy {
				t.Errorf("healthy = %v, want %v", a.healthy, tc.wantHealthy)
			}
		})
	}
	t.Run("a failed answer is judged on nothing", func(t *testing.T) {
		tl := &timeline{}
		a := judge(newReg(), tl, answer{start: t0, err: errors.New("503")})
		if a.healthy || len(tl.violations) != 0 {
			t.Errorf("healthy %v, violations %v", a.healthy, tl.violations)
		}
	})
}

// TestWaitFor: waitFor finds the first wanted answer started at or after
// t, including one added while it waits, and gives up after its limit.
func TestWaitFor(t *testing.T) {
	t0 := time.Now()
	tl := &timeline{}
	tl.add(answer{start: t0.Add(-time.Second), healthy: true})
	tl.add(answer{start: t0.Add(time.Second)})
	if _, ok := tl.waitFor(context.Background(), t0, 2*askEvery, isHealthy); ok {
		t.Fatal("found a healthy answer where none started after t0")
	}
	go func() {
		time.Sleep(askEvery)
		tl.add(answer{start: t0.Add(3 * time.Second), healthy: true})
	}()
	after, ok := tl.waitFor(context.Background(), t0, 10*time.Second, isHealthy)
	if !ok || after != 3*time.Second {
		t.Fatalf("waitFor = %v, %v; want 3s, true", after, ok)
	}
}

// TestPodServerReusedAddress: a new pod on a released address serves its
// own value, and the old pod's connections are closed with it.
func TestPodServerReusedAddress(t *testing.T) {
	s, err := newPodServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ip := netip.MustParseAddr("127.4.9.2")
	if err := s.assign(ip, "a", 11); err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	url := fmt.Sprintf("http://%s:%d/metrics", ip, podPort)
	if body := get(t, c, url); !strings.Contains(body, "} 11\n") {
		t.Fatalf("pod a's page:\n%s", body)
	}
	if err := s.assign(ip, "b", 22); err == nil {
		t.Fatal("assign of a held address: no error")
	}
	s.release(ip)
	if _, err := c.Get(url); err == nil {
		t.Fatal("released address still answers")
	}
	if err := s.assign(ip, "b", 22); err != nil {
		t.Fatal(err)
	}
	if body := get(t, c, url); !strings.Contains(body, "} 22\n") || strings.Contains(body, "} 11\n") {
		t.Fatalf("pod b's page:\n%s", body)
	}
}

// TestPodServerModes: every misbehaviour makes a scrape like the adapter's
// (800ms timeout, 4 MiB limit, vLLM series) fail or find no queue series.
func TestPodServerModes(t *testing.T) {
	s, err := newPodServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ip := netip.MustParseAddr("127.4.9.3")
	if err := s.assign(ip, "p", 42); err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	url := fmt.Sprintf("http://%s:%d/metrics", ip, podPort)
	for _, mode := range append([]string{modeHealthy}, modes...) {
		t.Run("mode="+mode, func(t *testing.T) {
			s.setMode(ip, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
			defer cancel()
			ok := scrapeOK(ctx, url)
			if ok != (mode == modeHealthy) {
				t.Errorf("usable page = %v", ok)
			}
		})
	}
}

// scrapeOK is a minimal scrape: 200, at most 4 MiB after the transport's
// decompression, and the pod's vLLM queue series.
func scrapeOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return false
		}
		r = zr // the limit applies after decompression, as in the adapter
	}
	body, err := io.ReadAll(io.LimitReader(r, 4<<20+1))
	if err != nil || len(body) > 4<<20 {
		return false
	}
	return strings.Contains(string(body), "vllm:num_requests_waiting{")
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
