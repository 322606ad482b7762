// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Counts returns how many pods' model-server samples are in each status as
// of now, by the rule of Get: ok (a good scrape younger than maxAge, even
// if later attempts failed), stale, failed, or never scraped.
func (s *Store) Counts(now time.Time, maxAge time.Duration) map[Status]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[Status]int{OK: 0, NotScraped: 0, Failed: 0, Stale: 0}
	for _, e := range s.pods {
		out[e.serving.status(now, maxAge)]++
	}
	return out
}

// Collector exports the store's pod counts by status as
// inference_metrics_adapter_pods{status}, read at collection time.
type Collector struct {
	store  *Store
	maxAge time.Duration
	now    func() time.Time
	desc   *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector over s.
func NewCollector(s *Store, maxAge time.Duration, now func() time.Time) *Collector {
	return &Collector{store: s, maxAge: maxAge, now: now, desc: prometheus.NewDesc(
		"inference_metrics_adapter_pods",
		"Target pods by the status of their model-server sample: ok (a good scrape younger than --max-age, even if later ones failed), stale (latest scrape good but older than --max-age), failed (latest scrape failed, no good one younger than --max-age), not_scraped (not scraped yet).",
		[]string{"status"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for st, n := range c.store.Counts(c.now(), c.maxAge) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), st.Label())
	}
}
