// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// metrics are a Manager's self-metrics.
type metrics struct {
	duration prometheus.Histogram
	scrapes  prometheus.Counter
	failures *prometheus.CounterVec
	bytes    prometheus.Counter
	targets  prometheus.Gauge
	// rejectedVec is inference_metrics_adapter_rejected_samples_total;
	// rejected holds its child of each parse.Reject.
	rejectedVec *prometheus.CounterVec
	rejected    [parse.NumRejects]prometheus.Counter
	// keptTLS, maxKeptTLS and notKeptTLS read tlsSlots' counts when
	// gathered: nothing on the scrape's path but tlsSlots' atomics.
	keptTLS    prometheus.GaugeFunc
	maxKeptTLS prometheus.GaugeFunc
	notKeptTLS prometheus.CounterFunc
}

// newMetrics makes a Manager's self-metrics, those of the kept HTTPS
// connections read from tlsSlots, and registers them into reg (nil: not
// registered).
func newMetrics(reg prometheus.Registerer, tlsSlots *connSlots) (*metrics, error) {
	const ns = "inference_metrics_adapter"
	m := &metrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns,
			Name:      "scrape_duration_seconds",
			Help:      "Duration of scrapes of model servers' /metrics pages (request, body, parse), successful or not.",
			Buckets:   []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		scrapes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns,
			Name:      "scrapes_total",
			Help:      "Scrapes attempted, successful or not.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns,
			Name:      "scrape_failures_total",
			Help:      "Scrapes that failed, by reason (timeout, connection, http_status, body_too_large, redirect, parse, limit, canceled).",
		}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns,
			Name:      "scrape_body_bytes_total",
			Help:      "Bytes of /metrics pages read, after gzip decompression.",
		}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns,
			Name:      "scrape_targets",
			Help:      "Targets with a background scrape loop.",
		}),
		rejectedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns,
			Name:      "rejected_samples_total",
			Help:      "Sample values of scraped pages refused by the parser, by reason (non_finite, negative, above_one); the page's other values are kept.",
		}, []string{"reason"}),
		keptTLS: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns,
			Name:      "scrape_kept_tls_connections",
			Help:      "HTTPS scrape connections kept for the next scrape now, over all targets (a target's counts while its scrape runs too); at most scrape_max_kept_tls_connections.",
		}, func() float64 { return float64(tlsSlots.held.Load()) }),
		maxKeptTLS: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns,
			Name:      "scrape_max_kept_tls_connections",
			Help:      "The bound on kept HTTPS scrape connections over all targets (--scrape-max-kept-tls-connections).",
		}, func() float64 { return float64(tlsSlots.max) }),
		notKeptTLS: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: ns,
			Name:      "scrape_tls_connections_not_kept_total",
			Help:      "HTTPS scrapes whose connection could have been kept but was closed because scrape_max_kept_tls_connections were kept already; the target's next scrape pays a TLS handshake.",
		}, func() float64 { return float64(tlsSlots.full.Load()) }),
	}
	for _, r := range Reasons() {
		m.failures.WithLabelValues(r) // every reason is visible from the start, at 0
	}
	for r := range parse.NumRejects {
		m.rejected[r] = m.rejectedVec.WithLabelValues(r.String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.scrapes, m.failures, m.bytes, m.targets, m.rejectedVec, m.keptTLS, m.maxKeptTLS, m.notKeptTLS} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering scrape metrics: %w", err)
		}
	}
	return m, nil
}

// countRejected adds the page's refused sample values to rejected_samples_total.
func (m *metrics) countRejected(page *parse.Page) {
	for r, n := range page.Rejected {
		if n > 0 {
			m.rejected[r].Add(float64(n))
		}
	}
}
