// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"fmt"
	"math"
	"regexp"
	"slices"
)

// numBuiltin is the number of Server values taken by the built-in servers
// (Unknown included); custom servers are numbered from here on.
const numBuiltin = len(dialects)

// MaxCustomServers is the most custom servers a Servers holds.
const MaxCustomServers = 100

// CustomServer is a model server outside the built-in table: which of its
// series carry which signal. Signals whose Series has no Name are absent.
// Queue and Batch are summed over a model's series, KVCache and BatchFill
// maxed, as for the built-in servers.
type CustomServer struct {
	// Name is the server's spelling in the inference-metrics-adapter/server
	// annotation: a lower-case DNS label that is not a built-in name.
	Name string
	// ModelLabel names the label that holds the model; "" when none does.
	ModelLabel string
	Queue      Series
	Batch      Series
	KVCache    Series
	BatchFill  Series
}

// Series selects the samples that carry one signal.
type Series struct {
	// Name is the metric name, e.g. my_server_queue_depth.
	Name string
	// Labels are exact label matches that all must hold; a label absent from
	// a sample counts as "", as in PromQL.
	Labels map[string]string
	// Scale multiplies every sample, e.g. 0.01 for a percentage that should
	// be a fraction; 0 means 1.
	Scale float64
}

// Servers is the set of servers a Parser knows: the built-in ones and the
// custom ones given to NewServers. It is immutable and safe to share; nil
// means the built-in servers only.
type Servers struct {
	dialects   []dialect   // built-ins, then custom servers in the order given
	histograms func() bool // nil: always parse the latency histograms
}

var (
	serverNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// NewServers returns the built-in servers plus custom, numbered in the given
// order from the first Server value after the built-ins. It checks what the
// parser relies on (names, metric and label syntax, scales) and reports the
// first problem; pkg/adapter/dialect checks a file the same way, with line
// numbers.
func NewServers(custom []CustomServer) (*Servers, error) {
	if len(custom) > MaxCustomServers {
		return nil, fmt.Errorf("%d custom servers, at most %d allowed", len(custom), MaxCustomServers)
	}
	s := &Servers{dialects: slices.Clone(dialects[:])}
	for i, c := range custom {
		if err := CheckServerName(c.Name); err != nil {
			return nil, fmt.Errorf("custom server %d: %w", i+1, err)
		}
		if _, taken := s.ByName(c.Name); taken {
			return nil, fmt.Errorf("custom server %q: name used twice", c.Name)
		}
		if c.ModelLabel != "" && !labelNameRE.MatchString(c.ModelLabel) {
			return nil, fmt.Errorf("custom server %q: model label %q is not a label name", c.Name, c.ModelLabel)
		}
		d := dialect{name: c.Name, modelLabel: c.ModelLabel}
		for _, rs := range []struct {
			what string
			r    role
			s    Series
		}{{"queue", roleQueue, c.Queue}, {"batch", roleBatch, c.Batch}, {"kvCache", roleKV, c.KVCache}, {"batchFill", roleFill, c.BatchFill}} {
			if rs.s.Name == "" {
				if len(rs.s.Labels) > 0 || rs.s.Scale != 0 {
					return nil, fmt.Errorf("custom server %q: %s has labels or a scale but no series", c.Name, rs.what)
				}
				continue
			}
			se, err := newSeries(rs.s, rs.r)
			if err != nil {
				return nil, fmt.Errorf("custom server %q: %s: %w", c.Name, rs.what, err)
			}
			d.series = append(d.series, se)
		}
		if len(d.series) == 0 {
			return nil, fmt.Errorf("custom server %q: no series for any signal", c.Name)
		}
		d.series = groupByName(d.series)
		s.dialects = append(s.dialects, d)
	}
	return s, nil
}

func newSeries(in Series, r role) (series, error) {
	if !metricNameRE.MatchString(in.Name) {
		return series{}, fmt.Errorf("series %q is not a metric name", in.Name)
	}
	if in.Scale < 0 || math.IsNaN(in.Scale) || math.IsInf(in.Scale, 0) {
		return series{}, fmt.Errorf("scale %v is not a positive number", in.Scale)
	}
	se := series{name: in.Name, role: r, scale: in.Scale}
	if se.scale == 1 {
		se.scale = 0
	}
	for k, v := range in.Labels {
		if !labelNameRE.MatchString(k) {
			return series{}, fmt.Errorf("label %q is not a label name", k)
		}
		se.filters = append(se.filters, labelMatch{k, v})
	}
	slices.SortFunc(se.filters, func(a, b labelMatch) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	return se, nil
}

// CheckServerName reports why name cannot name a custom server: it must be
// a lower-case DNS label (at most 63 of a-z, 0-9 and '-', starting and
// ending with a letter or digit) and not a built-in server's name.
func CheckServerName(name string) error {
	if len(name) > 63 || !serverNameRE.MatchString(name) {
		return fmt.Errorf("server name %q: want a lower-case DNS label (a-z, 0-9, '-'; at most 63)", name)
	}
	if _, ok := ServerByName(name); ok {
		return fmt.Errorf("server name %q is a built-in server", name)
	}
	return nil
}

// IsMetricName reports whether s is a valid (legacy) Prometheus metric name.
func IsMetricName(s string) bool { return metricNameRE.MatchString(s) }

// IsLabelName reports whether s is a valid (legacy) Prometheus label name.
func IsLabelName(s string) bool { return labelNameRE.MatchString(s) }

// all returns the dialect table; nil Servers means the built-ins.
// WithHistograms returns a copy of s (nil: the built-in servers) whose
// Parsers parse the latency histograms' bucket lines only while wanted
// returns true; it is called once per page, before the page is parsed, and
// must be cheap and safe for concurrent use. A page parsed without them has
// Page.HistogramsSkipped set and no Hists; gauges and counters are parsed
// either way. Detection counts the lines of the series parsed, so a page is
// told by its gauges and counters then. nil wanted means always.
func (s *Servers) WithHistograms(wanted func() bool) *Servers {
	return &Servers{dialects: s.all(), histograms: wanted}
}

// histogramSwitch returns s's WithHistograms function, nil for always.
func (s *Servers) histogramSwitch() func() bool {
	if s == nil {
		return nil
	}
	return s.histograms
}

func (s *Servers) all() []dialect {
	if s == nil {
		return dialects[:]
	}
	return s.dialects
}

// ByName returns the server, built-in or custom, spelled name (the
// annotation value).
func (s *Servers) ByName(name string) (Server, bool) {
	if sv, ok := ServerByName(name); ok {
		return sv, sv != Unknown
	}
	ds := s.all()
	for i := numBuiltin; i < len(ds); i++ {
		if ds[i].name == name {
			return Server(i), true
		}
	}
	return Unknown, false
}

// Name returns the spelling of sv: a built-in name, a custom server's
// configured name, or "unknown".
func (s *Servers) Name(sv Server) string {
	if ds := s.all(); int(sv) >= numBuiltin && int(sv) < len(ds) {
		return ds[sv].name
	}
	return sv.String()
}

// Custom reports how many custom servers s holds.
func (s *Servers) Custom() int { return len(s.all()) - numBuiltin }
