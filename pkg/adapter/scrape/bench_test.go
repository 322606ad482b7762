// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// copyingSink copies each page into storage it reuses, as a store would.
type copyingSink struct {
	models []parse.Model
	at     time.Time
}

func (s *copyingSink) Record(_ types.NamespacedName, at time.Time, page *parse.Page, err error) {
	if err != nil {
		panic(err) // a benchmark of failures would measure nothing useful
	}
	s.at = at
	s.models = append(s.models[:0], page.Models...)
}

// benchServer serves page over loopback with a Content-Length, gzipped when
// asked for and zpage is set, as prometheus_client does.
func benchServer(b *testing.B, page, zpage []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := page
		if zpage != nil && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			body = zpage
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// clients are the two scrape clients the benchmarks compare in one run:
// the package's own and, for reference, net/http's as the adapter used it
// before (legacy_test.go).
var clients = []struct {
	name string
	use  func(b *testing.B, m *Manager) // before Run
}{
	{"client=net-http", func(b *testing.B, m *Manager) {
		lc := useLegacyClient(m)
		b.Cleanup(lc.client.CloseIdleConnections)
	}},
	{"client=own", func(*testing.B, *Manager) {}},
}

// BenchmarkScrape compares, in one run, a whole scrape of the vLLM V1
// fixture (GET + read + parse + Sink.Record, as one loop iteration does it)
// through each client, plain and gzipped, with a bare net/http keep-alive
// GET reading the body into a reused buffer.
//
//	go test -run '^$' -bench BenchmarkScrape -benchmem ./pkg/adapter/scrape
func BenchmarkScrape(b *testing.B) {
	page := loadFixture(b)
	zpage := gzipped(b, page)

	b.Run("bare-GET", func(b *testing.B) {
		srv := benchServer(b, page, nil)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}
		defer client.CloseIdleConnections()
		buf := make([]byte, 0, 64<<10)
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
			for {
				n, err := resp.Body.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			resp.Body.Close()
			if len(buf) != len(page) {
				b.Fatalf("read %d bytes, want %d", len(buf), len(page))
			}
		}
	})

	for _, bc := range []struct {
		name    string
		zpage   []byte
		chunked bool
	}{
		{"whole-scrape", nil, false},
		{"whole-scrape-chunked", nil, true},
		{"whole-scrape-gzip", zpage, false},
	} {
		for _, cl := range clients {
			b.Run(bc.name+"/"+cl.name, func(b *testing.B) {
				var srv *httptest.Server
				if bc.chunked {
					srv = chunkedServer(b, page)
				} else {
					srv = benchServer(b, page, bc.zpage)
				}
				cfg := DefaultConfig()
				cfg.Concurrency = 1
				cfg.RequestGzip = bc.zpage != nil
				m, err := NewManager(cfg, &copyingSink{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				cl.use(b, m)
				target := Target{Pod: types.NamespacedName{Namespace: "ns", Name: "p"}, URL: srv.URL}
				ep, err := m.newEndpoint(target)
				if err != nil {
					b.Fatal(err)
				}
				defer ep.close()
				ctx := context.Background()
				b.SetBytes(int64(len(page)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := m.scrapeOnce(ctx, m.workers, target, ep, nil, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// chunkedServer serves page without a Content-Length, so that net/http's
// server sends it chunked, as the simulator does for large pages.
func chunkedServer(b *testing.B, page []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(page)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkThousandTargets scrapes 1,000 targets, each its own host:port on
// 127.0.0.1 (so each keeps its own keep-alive connection, as pods do), with
// the default pools and 1,000 idle loops running, through each client. One
// op is one round of 1,000 scrapes through ScrapeNow, after a first round
// that opened the connections. It reports the memory in use after the
// rounds, and KB-per-target: the heap and stack that the targets, their
// loops and kept connections added, measured from before SetTargets. The
// servers run in a process of their own (pageServers), so these are the
// Manager's own.
//
//	go test -run '^$' -bench BenchmarkThousandTargets -benchmem ./pkg/adapter/scrape
func BenchmarkThousandTargets(b *testing.B) {
	for _, cl := range clients {
		b.Run(cl.name, func(b *testing.B) {
			const n = 1000
			targets := pageServers(b, n)

			cfg := DefaultConfig()
			cfg.Interval, cfg.Timeout = time.Hour, 10*time.Second // loops exist but do not scrape
			m, err := NewManager(cfg, &lockedSink{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			cl.use(b, m)
			ctx := runManager(b, m)
			before := inUse()
			m.SetTargets(targets)
			m.ScrapeNow(ctx, targets) // warm up: connections, buffers, parsers

			b.ReportAllocs()
			for b.Loop() {
				m.ScrapeNow(ctx, targets)
			}
			b.StopTimer()
			after := inUse()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/scrape")
			b.ReportMetric(float64(after)/(1<<20), "MB-heap+stack")
			b.ReportMetric(float64(after-before)/n/(1<<10), "KB-per-target")
			b.ReportMetric(float64(ms.Sys)/(1<<20), "MB-sys")
			b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
		})
	}
}

// inUse is the heap and the goroutine stacks in use, after a collection.
func inUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

// lockedSink is a copyingSink safe for concurrent Records.
type lockedSink struct {
	mu sync.Mutex
	copyingSink
}

func (s *lockedSink) Record(pod types.NamespacedName, at time.Time, page *parse.Page, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copyingSink.Record(pod, at, page, err)
}

// BenchmarkLoops1000 runs 1,000 targets' scrape loops at a 1 s interval,
// as the adapter runs them (one loop per pod, the default pools), for
// b.N intervals, through each client, with the dispatcher's slack of
// before (5ms) and of now (dispatchSlack: 50ms at 1s). It reports the
// process's CPU per scrape (getrusage; the loopback servers run in a
// process of their own) and the stack and heap in use at the end, the
// figures that grow with the number of pods.
//
//	go test -run '^$' -bench BenchmarkLoops1000 -benchtime 10x ./pkg/adapter/scrape
func BenchmarkLoops1000(b *testing.B) {
	for _, bc := range []struct {
		client string
		use    func(b *testing.B, m *Manager)
		slack  time.Duration
	}{
		{clients[0].name, clients[0].use, 0},
		{clients[1].name, clients[1].use, 5 * time.Millisecond},
		{clients[1].name, clients[1].use, 0},
	} {
		slack := cmp.Or(bc.slack, dispatchSlack(time.Second))
		b.Run(fmt.Sprintf("%s/slack=%v", bc.client, slack), func(b *testing.B) {
			const n = 1000
			targets := pageServers(b, n)

			cfg := DefaultConfig()
			cfg.Interval, cfg.Timeout = time.Second, time.Second
			cfg.NamespaceConcurrency = cfg.Concurrency
			cfg.dispatchSlack = slack
			sink := &countingSink{}
			m, err := NewManager(cfg, sink, prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			bc.use(b, m)
			runManager(b, m)
			m.SetTargets(targets)
			time.Sleep(3 * cfg.Interval) // every loop started and scraped once

			scrapes := func() float64 { return testutil.ToFloat64(m.metrics.scrapes) }
			before, cpu0 := scrapes(), processCPU(b)
			for b.Loop() {
				time.Sleep(cfg.Interval)
			}
			got, cpu := scrapes()-before, processCPU(b)-cpu0
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(cpu.Nanoseconds())/got, "cpu-ns/scrape")
			b.ReportMetric(got/float64(b.N*n), "scrapes/target/interval")
			b.ReportMetric(float64(ms.StackInuse)/(1<<20), "MB-stack")
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MB-heap")
			b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
			b.ReportMetric(float64(sink.failed.Load()), "failed")
		})
	}
}

// countingSink counts outcomes (a machine under load may time some out).
type countingSink struct{ ok, failed atomic.Int64 }

func (s *countingSink) Record(_ types.NamespacedName, _ time.Time, _ *parse.Page, err error) {
	if err != nil {
		s.failed.Add(1)
		return
	}
	s.ok.Add(1)
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveEnv, set in the environment of this test binary, makes it a page
// server for the benchmarks instead (see TestMain): it serves the vLLM V1
// fixture on that many loopback listeners, prints their addresses, and
// exits when its standard input closes.
const serveEnv = "SCRAPE_BENCH_SERVE_PAGES"

func TestMain(m *testing.M) {
	if n := os.Getenv(serveEnv); n != "" {
		if err := servePages(n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// servePages is the page server's side of pageServers.
func servePages(count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", serveEnv, count, err)
	}
	page, err := os.ReadFile("testdata/vllm-v1.prom")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(page)))
			_, _ = w.Write(page)
		}),
		ReadHeaderTimeout: time.Minute,
	}
	defer srv.Close()
	out := bufio.NewWriter(os.Stdout)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { _ = srv.Serve(l) }()
		fmt.Fprintln(out, l.Addr())
	}
	if err := out.Flush(); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
	return nil
}

// pageServers serves the vLLM V1 fixture on n loopback listeners, each its
// own host:port (so each target keeps its own keep-alive connection, as
// pods do), until the benchmark ends. They run in a process of their own
// (this test binary, see serveEnv), so that the benchmark's CPU and memory
// figures are the scrape client's alone.
func pageServers(b *testing.B, n int) []Target {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", serveEnv, n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	b.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("page server: %v", err)
			}
		case <-time.After(waitLimit):
			_ = cmd.Process.Kill()
			if err := <-done; err != nil {
				b.Logf("page server killed: %v", err)
			}
			b.Errorf("page server (pid %d) did not exit within %v of its input's close", cmd.Process.Pid, waitLimit)
		}
	})
	lines := bufio.NewScanner(stdout)
	targets := make([]Target, 0, n)
	for len(targets) < n && lines.Scan() {
		targets = append(targets, Target{Pod: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("p", len(targets))}, URL: "http://" + lines.Text() + "/metrics"})
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	if len(targets) < n {
		b.Fatalf("page server gave %d addresses, want %d: %v", len(targets), n, lines.Err())
	}
	return targets
}

// runManager runs m until the benchmark ends, and returns Run's context.
func runManager(b *testing.B, m *Manager) context.Context {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("scrape manager: %v", err)
		}
	})
	return ctx
}
