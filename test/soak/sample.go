// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// sampleEvery is how often the adapters' memory, goroutines and logs are read.
const sampleEvery = 5 * time.Second

// Flatness and log bounds. Slopes are fitted per process lifetime, after
// its first minute (caches fill, the first scrapes), and asserted only over
// lifetimes of at least minLifetime: shorter fits are reported, not judged.
const (
	warmUp           = 2 * time.Minute
	minLifetime      = 5 * time.Minute
	maxRSSSlope      = 1 << 20 // bytes per minute
	maxGoroutineRate = 2.0     // goroutines per minute
	maxLogLines      = 120     // per replica per minute, at the chart's --v=1, faults included
)

// sample is one reading of one adapter process.
type sample struct {
	at         time.Time
	pid        int
	rss        int64   // bytes
	goroutines float64 // -1 when /metrics could not be read
	logLines   int     // lines in the replica's log file so far
}

// sampler reads every replica every sampleEvery until ctx ends. An
// adapter process that exited without being killed is a violation.
func (e *env) sampler(ctx context.Context, tl *timeline, fs *faults) [][]sample {
	out := make([][]sample, len(e.adapters.Ports))
	crashed := map[*framework.Process]bool{}
	httpc, err := e.adapters.HTTPClient(e.cp.Admin)
	if err != nil {
		tl.violate(time.Now(), vCrash, "sampler: %v", err)
		return out
	}
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		for i := range out {
			p := e.adapters.Replica(i)
			if exited, werr := p.Exited(); exited {
				if !fs.wasKilled(p) && !crashed[p] {
					crashed[p] = true
					tl.violate(time.Now(), vCrash, "replica %d (pid %d) exited: %v\n%s", i, p.PID(), werr, p.Tail(20))
				}
				continue
			}
			s := sample{at: time.Now(), pid: p.PID(), goroutines: -1}
			s.rss, _ = readRSS(s.pid)
			if g, err := goroutines(ctx, httpc, e.adapters.ReplicaURL(i)); err == nil {
				s.goroutines = g
			}
			s.logLines, _ = countLines(p.LogPath)
			out[i] = append(out[i], s)
		}
	}
}

// readRSS reads VmRSS from /proc/PID/status.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pid %d VmRSS: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// goroutines reads go_goroutines from the replica's own /metrics.
func goroutines(ctx context.Context, c *http.Client, base string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s/metrics: %s", base, resp.Status)
	}
	return gaugeValue(resp.Body, "go_goroutines")
}

// gaugeValue finds an unlabelled sample of name in a text exposition.
func gaugeValue(r io.Reader, name string) (float64, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s sample", name)
}

// countLines counts the newlines in path.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// slope is the least-squares slope of y over x; ok false with fewer than
// three points or no spread in x.
func slope(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 3 || len(xs) != len(ys) {
		return 0, false
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	return (n*sxy - sx*sy) / den, true
}

// lifetime is one adapter process's samples and fitted slopes.
type lifetime struct {
	replica, pid        int
	span                time.Duration // fitted span, after warmUp
	rssSlope, gorSlope  float64       // per minute
	rssFirst, rssLast   int64
	gorFirst, gorLast   float64
	fitted, judged, gok bool
}

// lifetimes splits each replica's samples by process and fits RSS and
// goroutines over minutes, after each process's first warmUp.
func lifetimes(samples [][]sample) []lifetime {
	var out []lifetime
	for i, ss := range samples {
		for start := 0; start < len(ss); {
			end := start
			for end < len(ss) && ss[end].pid == ss[start].pid {
				end++
			}
			seg := ss[start:end]
			start = end
			lt := lifetime{replica: i, pid: seg[0].pid}
			born := seg[0].at
			var xs, rs, gxs, gs []float64
			var first, last *sample
			for k := range seg {
				s := &seg[k]
				if s.at.Sub(born) < warmUp {
					continue
				}
				if first == nil {
					first = s
				}
				last = s
				x := s.at.Sub(born).Minutes()
				xs, rs = append(xs, x), append(rs, float64(s.rss))
				if s.goroutines >= 0 {
					gxs, gs = append(gxs, x), append(gs, s.goroutines)
				}
			}
			if first == nil {
				continue
			}
			lt.span = last.at.Sub(first.at)
			lt.rssFirst, lt.rssLast = first.rss, last.rss
			lt.gorFirst, lt.gorLast = first.goroutines, last.goroutines
			lt.rssSlope, lt.fitted = slope(xs, rs)
			lt.gorSlope, lt.gok = slope(gxs, gs)
			lt.judged = lt.fitted && lt.span >= minLifetime
			out = append(out, lt)
		}
	}
	return out
}

// logRate is the most lines any replica logged in one minute (sliding
// over the samples), and the replica.
func logRate(samples [][]sample) (lines, replica int, ok bool) {
	for i, ss := range samples {
		for a := range ss {
			for b := a; b < len(ss); b++ {
				if d := ss[b].at.Sub(ss[a].at); d > time.Minute+sampleEvery/2 {
					break
				} else if d >= time.Minute-sampleEvery/2 {
					if n := ss[b].logLines - ss[a].logLines; !ok || n > lines {
						lines, replica, ok = n, i, true
					}
				}
			}
		}
	}
	return lines, replica, ok
}
