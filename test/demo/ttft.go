// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
)

// recorder is an http.RoundTripper for the load generator's client that
// records, as they happen, each streamed response's time to first byte
// (for streaming completions, the first token event) and each response's
// end, so that the live table can show TTFT and throughput while the load
// is still running (loadgen reports only when the run ends).
type recorder struct {
	base http.RoundTripper
	now  func() time.Time

	mu     sync.Mutex
	firsts []event // by time of the first byte
	ends   []time.Time
}

// event is one request's first byte: when, and how long after sending.
type event struct {
	at   time.Time
	ttft time.Duration
}

var _ http.RoundTripper = (*recorder)(nil)

func newRecorder(base http.RoundTripper, now func() time.Time) *recorder {
	return &recorder{base: base, now: now}
}

// RoundTrip sends req and wraps a successful response's body.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	start := r.now()
	resp, err := r.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, rec: r, start: start}
	return resp, nil
}

func (r *recorder) first(start time.Time) {
	now := r.now()
	r.mu.Lock()
	r.firsts = append(r.firsts, event{at: now, ttft: now.Sub(start)})
	r.mu.Unlock()
}

func (r *recorder) end() {
	now := r.now()
	r.mu.Lock()
	r.ends = append(r.ends, now)
	r.mu.Unlock()
}

// window returns the p90 TTFT of the requests whose first byte came in
// (to-window, to], how many those were, and the rate of responses that
// ended in that window, per second.
func (r *recorder) window(to time.Time, window time.Duration) (p90 time.Duration, n int, endRate float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ttfts []time.Duration
	for i := len(r.firsts) - 1; i >= 0 && r.firsts[i].at.After(to.Add(-window)); i-- {
		if !r.firsts[i].at.After(to) {
			ttfts = append(ttfts, r.firsts[i].ttft)
		}
	}
	ended := 0
	for i := len(r.ends) - 1; i >= 0 && r.ends[i].After(to.Add(-window)); i-- {
		if !r.ends[i].After(to) {
			ended++
		}
	}
	return loadgen.Percentile(ttfts, 0.9), len(ttfts), float64(ended) / window.Seconds()
}

// timedBody notes the first byte read and the end of a stream that
// delivered one.
type timedBody struct {
	io.ReadCloser
	rec        *recorder
	start      time.Time
	got, ended bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.got {
		b.got = true
		b.rec.first(b.start)
	}
	if errors.Is(err, io.EOF) {
		b.finish()
	}
	return n, err
}

// Close ends the response: the load generator closes the body after the
// stream's [DONE], usually without reading to EOF.
func (b *timedBody) Close() error {
	b.finish()
	return b.ReadCloser.Close()
}

func (b *timedBody) finish() {
	if b.got && !b.ended {
		b.ended = true
		b.rec.end()
	}
}
