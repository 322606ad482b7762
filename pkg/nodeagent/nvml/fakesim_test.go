// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// busyServer is a stand-in for a simulator's GET /sim/busy whose counters
// the test sets.
type busyServer struct {
	mu sync.Mutex
	b  simBusy
}

func (s *busyServer) set(now, busy, sm float64) {
	s.mu.Lock()
	s.b = simBusy{Now: now, Busy: busy, SMBusy: sm}
	s.mu.Unlock()
}

func (s *busyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/sim/busy" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	b := s.b
	s.mu.Unlock()
	_ = json.NewEncoder(w).Encode(b)
}

// TestFakeSim: a GPU held by a simulator reads the simulator's busy
// fraction between two reads as utilization and the fullness-weighted
// fraction as SM activity; an unheld GPU reads 0; a GPU whose simulator
// does not answer reads absent, not 0.
func TestFakeSim(t *testing.T) {
	sim := &busyServer{}
	ts := httptest.NewServer(sim)
	defer ts.Close()
	dir := t.TempDir()
	mapPath := filepath.Join(dir, "gpus.json")
	writeMap := func(m map[string]string) {
		t.Helper()
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mapPath, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held, unheld, dead := FakeUUID(FakeSimProfile, 0), FakeUUID(FakeSimProfile, 1), FakeUUID(FakeSimProfile, 2)
	writeMap(map[string]string{held: ts.URL, dead: "http://127.0.0.1:1"})
	t.Setenv(FakeSimGPUsEnv, mapPath)

	clock := newClock()
	r, err := NewFakeReader(FakeSimProfile, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	byUUID := func(gpus []GPU) map[string]GPU {
		out := map[string]GPU{}
		for _, g := range gpus {
			out[g.UUID] = g
		}
		return out
	}

	// 10 s in, busy 5 s of them: the first read covers the time since start.
	sim.set(10, 5, 1)
	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := byUUID(gpus)
	if got := g[held]; !got.HasUtilization || got.Utilization != 0.5 {
		t.Errorf("first read: held GPU %+v, want utilization 0.5", got)
	}
	// One running request: every step busy over the next 2 s, the steps
	// a quarter full.
	clock.step(time.Second)
	sim.set(12, 7, 1.5)
	gpus, err = r.Read(gpus)
	if err != nil {
		t.Fatal(err)
	}
	g = byUUID(gpus)
	tests := []struct {
		uuid           string
		hasUtil, hasSM bool
		util, smActive float64
	}{
		{held, true, true, 1, 0.25},
		{unheld, true, true, 0, 0},
		{dead, false, false, 0, 0},
	}
	for _, tc := range tests {
		got := g[tc.uuid]
		if got.HasUtilization != tc.hasUtil || got.HasSMActive != tc.hasSM || got.Utilization != tc.util || got.SMActive != tc.smActive {
			t.Errorf("%s: %+v, want utilization %v (%v), SM activity %v (%v)", tc.uuid, got, tc.util, tc.hasUtil, tc.smActive, tc.hasSM)
		}
	}
}

func TestFakeSimNeedsMap(t *testing.T) {
	t.Setenv(FakeSimGPUsEnv, "")
	if _, err := NewFakeReader(FakeSimProfile, nil); err == nil {
		t.Error("the sim profile started without a device map")
	}
}

func TestFraction(t *testing.T) {
	mark := func(url string, now, busy float64) simMark {
		return simMark{url: url, b: simBusy{Now: now, Busy: busy}}
	}
	tests := []struct {
		name      string
		prev, cur simMark
		want      float64
	}{
		{"unheld GPU", simMark{}, simMark{}, 0},
		{"same simulator: the delta", mark("a", 10, 5), mark("a", 12, 6), 0.5},
		{"first reading: since start", simMark{}, mark("a", 10, 2), 0.2},
		{"another simulator: since its start", mark("a", 100, 90), mark("b", 10, 1), 0.1},
		{"restarted simulator: since its start", mark("a", 100, 90), mark("a", 10, 3), 0.3},
		{"rounding above 1 is capped", mark("a", 10, 5), mark("a", 11, 6.0001), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fraction(tc.prev, tc.cur, busyOf); got < tc.want-1e-9 || got > tc.want+1e-9 {
				t.Errorf("fraction = %v, want %v", got, tc.want)
			}
		})
	}
}
