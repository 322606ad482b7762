// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// maxPage bounds one /metrics page.
const maxPage = 16 << 20

// reading is one sample of a server's page; nil fields were absent.
type reading struct {
	queue, batch, kv, preemptions *float64
}

// pageReader reads the server's signals once.
type pageReader interface {
	Read(ctx context.Context) (reading, error)
}

// metricsReader GETs a /metrics page and reads it with the project's parser.
type metricsReader struct {
	url    string
	model  string
	client *http.Client
	parser *parse.Parser
}

var _ pageReader = (*metricsReader)(nil)

func newMetricsReader(url, model string, client *http.Client) *metricsReader {
	return &metricsReader{url: url, model: model, client: client, parser: parse.NewParser()}
}

// Read implements pageReader. It takes the series of the probed model when
// the page labels models, else every model's (queue and batch summed, KV maxed).
func (m *metricsReader) Read(ctx context.Context) (reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return reading{}, fmt.Errorf("building request for %s: %w", m.url, err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return reading{}, fmt.Errorf("GET %s: %w", m.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return reading{}, fmt.Errorf("GET %s: status %d", m.url, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return reading{}, fmt.Errorf("reading %s: %w", m.url, err)
	}
	return readPage(m.parser, body, m.model)
}

// readPage is the pure part of Read.
func readPage(p *parse.Parser, body []byte, model string) (reading, error) {
	page, err := p.Parse(body)
	if err != nil {
		return reading{}, fmt.Errorf("parsing metrics page: %w", err)
	}
	models := page.Models
	for i := range page.Models {
		if page.Models[i].Name == model {
			models = page.Models[i : i+1]
			break
		}
	}
	var r reading
	for i := range models {
		add := func(dst **float64, s catalog.Signal, keepMax bool) {
			v, ok := models[i].Value(s)
			switch {
			case !ok:
			case *dst == nil:
				*dst = new(v)
			case keepMax:
				**dst = max(**dst, v)
			default:
				**dst += v
			}
		}
		add(&r.queue, catalog.QueueSize, false)
		add(&r.batch, catalog.BatchSize, false)
		add(&r.kv, catalog.KVCacheUsage, true)
		if v, ok := models[i].Counter(catalog.Preemptions); ok {
			if r.preemptions == nil {
				r.preemptions = new(float64)
			}
			*r.preemptions += v
		}
	}
	return r, nil
}

// sampler reads a page every interval until stopped, and condenses the
// readings into Signals.
type sampler struct {
	mu       sync.Mutex
	readings []reading
	failures int
	lastErr  error
}

func (s *sampler) run(ctx context.Context, r pageReader, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		got, err := r.Read(rctx)
		cancel()
		s.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				s.failures++
				s.lastErr = err
			}
		} else {
			s.readings = append(s.readings, got)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *sampler) signals() (Signals, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return condense(s.readings, s.failures), s.lastErr
}

// condense turns readings into means, maxima and the counter's increase;
// a signal no reading had stays nil.
func condense(rs []reading, failures int) Signals {
	out := Signals{Samples: len(rs), Failures: failures}
	gauge := func(get func(reading) *float64) (mean, mx *float64) {
		var sum, top float64
		n := 0
		for _, r := range rs {
			if v := get(r); v != nil {
				sum += *v
				if n == 0 || *v > top {
					top = *v
				}
				n++
			}
		}
		if n == 0 {
			return nil, nil
		}
		return new(sum / float64(n)), new(top)
	}
	out.Queue, out.QueueMax = gauge(func(r reading) *float64 { return r.queue })
	out.Batch, out.BatchMax = gauge(func(r reading) *float64 { return r.batch })
	out.KV, out.KVMax = gauge(func(r reading) *float64 { return r.kv })
	var first, last *float64
	for _, r := range rs {
		if r.preemptions != nil {
			if first == nil {
				first = r.preemptions
			}
			last = r.preemptions
		}
	}
	if first != nil && *last >= *first { // a decrease is a restart: unknown
		out.Preemptions = new(*last - *first)
	}
	return out
}
