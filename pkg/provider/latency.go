package provider

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/catalog"
)

// LatencyDemand records when a latency percentile
// (inference_*_p50/p90/p99_seconds) was last asked for, so that the
// scrapers parse the servers' latency histograms, about two thirds of the
// parse on a vLLM page, only while someone wants them. It is one switch for
// the whole process, not per namespace or pod: an ask anywhere turns the
// histograms on for every pod. Safe for concurrent use.
type LatencyDemand struct {
	ttl   time.Duration
	clock clock.PassiveClock
	last  atomic.Int64 // unix nanoseconds of the latest ask; 0: none yet
}

// NewLatencyDemand returns a LatencyDemand under which the histograms are
// wanted for ttl after each ask; a ttl of zero or less wants them always.
func NewLatencyDemand(ttl time.Duration, clk clock.PassiveClock) *LatencyDemand {
	return &LatencyDemand{ttl: ttl, clock: clk}
}

// Ask records a question about sig; it counts only for a percentile.
func (d *LatencyDemand) Ask(sig catalog.Signal) {
	if d == nil {
		return
	}
	if _, _, ok := sig.Quantile(); ok {
		d.last.Store(d.clock.Now().UnixNano())
	}
}

// Wanted reports whether the latency histograms should be parsed now: the
// latest ask is younger than the TTL. It reads one atomic and the clock,
// without a lock or an allocation, for the scrapers to call before each
// page (see parse.Servers.WithHistograms).
func (d *LatencyDemand) Wanted() bool {
	if d.ttl <= 0 {
		return true
	}
	last := d.last.Load()
	return last != 0 && d.clock.Now().UnixNano()-last < int64(d.ttl)
}
