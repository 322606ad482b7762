// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    options
		wantErr string
	}{
		{name: "defaults", env: map[string]string{envBin: "/bin"}, want: options{binDir: "/bin", duration: 4 * time.Minute, outDir: "demo-out"}},
		{name: "set", env: map[string]string{envBin: "/b", envDuration: "90s", envOut: "/tmp/x"}, want: options{binDir: "/b", duration: 90 * time.Second, outDir: "/tmp/x"}},
		{name: "no bin", env: map[string]string{}, wantErr: "IMA_E2E_BIN is not set"},
		{name: "bad duration", env: map[string]string{envBin: "/b", envDuration: "4"}, wantErr: `DEMO_DURATION="4" is not a duration`},
		{name: "short duration", env: map[string]string{envBin: "/b", envDuration: "10s"}, wantErr: "--duration (DEMO_DURATION) must be at least 30s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := optionsFromEnv(func(k string) string { return tc.env[k] })
			if err == nil {
				err = o.validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o != tc.want {
				t.Errorf("options = %+v, want %+v", o, tc.want)
			}
		})
	}
}

// TestSchedule: the load fills the duration exactly, starts and ends within
// one pod's capacity, and peaks well past it but within maxReplicas pods.
func TestSchedule(t *testing.T) {
	capacity := simConfig().Capacity(promptTokens, outputTokens)
	for _, d := range []time.Duration{30 * time.Second, 50 * time.Second, 3 * time.Minute, 4 * time.Minute, 17*time.Minute + 3*time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			phases := schedule(d)
			var total time.Duration
			peak := 0.0
			for _, p := range phases {
				if p.Duration <= 0 {
					t.Fatalf("phase %+v has no duration", p)
				}
				total += p.Duration
				peak = max(peak, p.Rate)
			}
			if total != d {
				t.Errorf("phases last %s, want %s", total, d)
			}
			first, last := phases[0].Rate, phases[len(phases)-1].Rate
			if first >= capacity || last >= capacity {
				t.Errorf("base rates %.1f and %.1f req/s, want below one pod's %.1f", first, last, capacity)
			}
			if peak < 2.5*capacity || peak > 0.8*maxReplicas*capacity {
				t.Errorf("peak %.1f req/s, want between 2.5x one pod (%.1f) and 80%% of %d pods", peak, capacity, maxReplicas)
			}
			if got := rateAt(phases, d/2-time.Second); got != peak {
				t.Errorf("rate just before the middle = %.1f, want the peak %.1f", got, peak)
			}
			if got := rateAt(phases, d+time.Second); got != last {
				t.Errorf("rate after the end = %.1f, want the last phase's %.1f", got, last)
			}
			if w := time.Duration(scaleDownWindow(d)) * time.Second; w < 15*time.Second || w > 5*time.Minute {
				t.Errorf("scale-down window %s out of bounds", w)
			}
		})
	}
}

// TestRecorder streams from a real server on 127.0.0.1: the first byte comes
// after a delay, the end after another; the recorder sees both.
func TestRecorder(t *testing.T) {
	const firstAfter = 50 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(firstAfter)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: {\"text\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})}
	go func() { _ = srv.Serve(l) }() // http.ErrServerClosed after Close
	t.Cleanup(func() { srv.Close() })

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rec := newRecorder(tr, time.Now)
	client := &http.Client{Transport: rec, Timeout: 10 * time.Second}
	for range 3 {
		resp, err := client.Get("http://" + l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	p90, n, rate := rec.window(time.Now(), time.Minute)
	if n != 3 {
		t.Fatalf("recorded %d first bytes, want 3", n)
	}
	if p90 < firstAfter {
		t.Errorf("p90 TTFT %s, want at least the server's delay %s", p90, firstAfter)
	}
	if want := 3 / time.Minute.Seconds(); rate != want {
		t.Errorf("end rate %v/s, want %v/s", rate, want)
	}
	if _, n, _ := rec.window(time.Now().Add(2*time.Minute), time.Minute); n != 0 {
		t.Errorf("a window after the requests holds %d of them, want 0", n)
	}
}

func testRows() []row {
	nan := nan()
	return []row{
		{t: 2 * time.Second, offered: 3, served: 2.5, desired: 1, current: 1, ready: 1, hpaQueue: nan,
			pods: []podValues{{name: "model-abc-x1", queue: 0, batch: 2, kv: 0.25}}, ttftP90: 40 * time.Millisecond, ttftCount: 6},
		{t: 4 * time.Second, offered: 18, served: 6, desired: 4, current: 1, ready: 1, hpaQueue: 9,
			pods: []podValues{{name: "model-abc-x1", queue: 9, batch: 4, kv: 0.69}, {name: "model-abc-y2", queue: nan, batch: nan, kv: nan}}},
		{t: 6 * time.Second, offered: 18, served: 17, desired: 4, current: 4, ready: 4, hpaQueue: 1.5,
			pods:    []podValues{{name: "model-abc-x1", queue: 3, batch: 4, kv: 0.7}, {name: "model-abc-y2", queue: 0, batch: 3, kv: 0.5}},
			ttftP90: 1500 * time.Millisecond, ttftCount: 40},
	}
}

// TestCSV: one line per row; what nobody measured is an empty cell, not 0.
func TestCSV(t *testing.T) {
	var b bytes.Buffer
	if err := writeCSV(&b, testRows()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || !slices.Equal(recs[0], csvHeader) {
		t.Fatalf("got %d records, header %v", len(recs), recs[0])
	}
	col := func(r int, name string) string { return recs[r][slices.Index(csvHeader, name)] }
	for _, c := range []struct {
		row       int
		col, want string
	}{
		{1, "hpa_queue_per_pod", ""},
		{1, "ttft_p90_ms", "40"},
		{2, "ttft_p90_ms", ""},
		{2, "pods_reporting", "1"}, // the pod the adapter left out is not averaged in as 0
		{2, "queue_mean", "9"},
		{3, "queue_mean", "1.5"},
		{3, "queue_max", "3"},
		{3, "hpa_current", "4"},
	} {
		if got := col(c.row, c.col); got != c.want {
			t.Errorf("row %d %s = %q, want %q", c.row, c.col, got, c.want)
		}
	}
}

// TestSVG: the chart is well-formed XML with a line per series, the title
// is escaped, and the TTFT nobody measured (second row) is a gap, not 0.
func TestSVG(t *testing.T) {
	var b bytes.Buffer
	if err := writeSVG(&b, testRows(), "demo <test>"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	polylines, dots := 0, 0
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			switch tok.Name.Local {
			case "polyline":
				polylines++
			case "circle":
				dots++
			}
		case xml.CharData:
			text.Write(tok)
		}
	}
	// offered, served, desired, ready, queue mean, queue max, target; the
	// TTFT is two points alone (no TTFT in the second row), drawn as dots.
	if polylines != 7 || dots != 2 {
		t.Errorf("%d polylines and %d dots, want 7 and 2", polylines, dots)
	}
	if !strings.Contains(text.String(), "demo <test>") {
		t.Errorf("the title does not read back: %q", text.String())
	}
}

func TestRowFormat(t *testing.T) {
	got := testRows()[1].format()
	for _, want := range []string{"0:04", "18.0", "4/1", "x1 9/4/69%", "y2 -/-/-"} {
		if !strings.Contains(got, want) {
			t.Errorf("row %q lacks %q", got, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		in          string
		pid, ppid   int
		comm, state string
		ok          bool
	}{
		{in: "123 (etcd) S 45 123 45 0 -1", pid: 123, comm: "etcd", state: "S", ppid: 45, ok: true},
		{in: "7 (a (b) c) R 1 7", pid: 7, comm: "a (b) c", state: "R", ppid: 1, ok: true},
		{in: "garbage", ok: false},
		{in: "x (y) S", ok: false},
	}
	for _, c := range cases {
		pid, comm, state, ppid, ok := parseStat(c.in)
		if ok != c.ok || (ok && (pid != c.pid || comm != c.comm || state != c.state || ppid != c.ppid)) {
			t.Errorf("parseStat(%q) = %d %q %q %d %v", c.in, pid, comm, state, ppid, ok)
		}
	}
}

// TestChildProcesses: a started child is listed until it has exited.
func TestChildProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	self := func() []string {
		left, err := childProcesses(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	if !slices.Contains(self(), fmt.Sprintf("%d sleep", pid)) {
		t.Errorf("children %v lack %d sleep", self(), pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill sleep: %v", err)
	}
	_ = cmd.Wait() // "signal: killed", from the kill above
	if slices.Contains(self(), fmt.Sprintf("%d sleep", pid)) {
		t.Errorf("children %v still list %d after it exited", self(), pid)
	}
}
