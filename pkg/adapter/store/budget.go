// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// The per-pod budget. A page is tenant input: within the parser's bounds it
// may name parse.DefaultMaxModels models of names up to
// parse.DefaultMaxLabelValueBytes long each, and without a budget of its
// own the store would keep all of them for every pod of the tenant's.
//
// A page over MaxModels models or MaxModelNameBytes bytes of model names
// (all its models together) keeps none of its models: every serving, rate,
// percentile and adapter question about the pod is then Absent, and says
// why, until a page within the budget. Keeping the first models alone would
// answer wrongly: a value combined over the models a metric selector picks
// could leave out one that was not kept, and whether a model left out is one
// the selector picks cannot be told without its name.
//
// The latency windows are bounded apart (MaxWindowModels, MaxWindowBuckets).
const (
	// MaxModels is the most models of a page the store keeps for a pod:
	// the parser's own bound on a page, so that it holds whatever limits
	// the page was parsed with.
	MaxModels = parse.DefaultMaxModels
	// MaxModelNameBytes is the most bytes of model names, all of a page's
	// models together, the store keeps for a pod (real names are tens of
	// bytes, a server serves a handful of models).
	MaxModelNameBytes = 8 << 10
	// MaxPodBytes is the most heap the store keeps for one pod, whatever
	// its pages: the largest page within the budget (MaxModels models,
	// MaxModelNameBytes of names, MaxWindowModels windowed models of
	// MaxWindowBuckets buckets in all, full windows, parse.MaxAdapters
	// adapters of the longest names) measured
	// 63 KiB (TestTenantPagesRetainAtMostMaxPodBytes); the real vLLM V1
	// page with full windows 8.7 KiB.
	MaxPodBytes = 80 << 10
)

// indexMin is the most models of a page found by a linear search; a page
// with more keeps an index of its models' names, so that its next page's
// models find their previous values in constant time each.
const indexMin = 8

// maxSpareModels is the most models of a small page (a pod's usual page:
// one model, and vLLM's "" of the LoRA line): spare records of small and
// of larger pages are kept apart (Store.spares).
const maxSpareModels = 2

// good is what the store keeps of a pod's latest good page. Record builds
// the next one outside the store's lock and swaps it in under it; a good is
// never changed while it is the pod's, and is reused (Store.spares) only
// once it no longer is, when no reader can hold it.
type good struct {
	at       time.Time // start of the scrape
	server   parse.Server
	rejected [parse.NumRejects]uint32 // values the page had refused, by reason
	models   []parse.Model            // none when over; without their Hists
	index    map[string]int           // model name -> index in models; nil for indexMin models or fewer
	adapters []parse.Adapter          // the models' Adapters point into it (lora.go)
	slo      sloState                 // rates and latency windows (slo.go)

	// over says the page was over the budget (pageModels models with
	// nameBytes bytes of names): none of its models is kept.
	over                  bool
	pageModels, nameBytes int
}

// overDetail says why a page over the budget answers nothing.
func (g *good) overDetail() string {
	return fmt.Sprintf("page (%s) names %d models with %d bytes of names, more than the %d models and %d bytes of model names the store keeps per pod: none of its models is kept, since a value over some of them could leave out one the metric selector picks", g.server, g.pageModels, g.nameBytes, MaxModels, MaxModelNameBytes)
}

// find returns the index of the model named name, trying hint first (the
// usual page repeats the previous one's models in the same order), or -1.
func (g *good) find(name string, hint int) int {
	if hint < len(g.models) && g.models[hint].Name == name {
		return hint
	}
	if g.index != nil {
		if i, ok := g.index[name]; ok {
			return i
		}
		return -1
	}
	for i := range g.models {
		if g.models[i].Name == name {
			return i
		}
	}
	return -1
}

// build makes g (a spare record, reused, or nil for a new one) the
// record of page, a good page scraped at at, that follows prev (the pod's
// latest good record, nil if none) and returns it. It runs outside the
// store's lock: no reader holds g, and prev does not change while the
// caller holds the pod's rec lock.
func build(g *good, at time.Time, page *parse.Page, prev *good, window time.Duration) *good {
	if g == nil {
		g = &good{}
	}
	g.at, g.server, g.rejected = at, page.Server, page.Rejected
	names := 0
	for i := range page.Models {
		names += len(page.Models[i].Name)
	}
	g.over = len(page.Models) > MaxModels || names > MaxModelNameBytes
	g.pageModels, g.nameBytes = len(page.Models), names
	ms := page.Models
	if g.over {
		ms = nil
	}
	g.models = append(g.models[:0], ms...)
	clear(g.models[len(g.models):cap(g.models)]) // no names kept past the page's
	for i := range g.models {
		g.models[i].Hists = [len(g.models[i].Hists)]*parse.Histogram{} // the parser's memory; the windows hold copies
	}
	g.copyAdapters()
	same := g.slo.build(at, page.HistogramsSkipped, ms, prev, window)
	if same {
		// The same names as prev's: keep prev's strings (the index's keys),
		// so that a name the parser made anew for this page is not kept twice.
		for i := range g.models {
			g.models[i].Name = prev.models[i].Name
		}
	}
	g.indexModels(prev, same)
	return g
}

// indexModels gives g an index of its models' names, when it has more than
// indexMin: prev's when same says g's models are prev's, in the same order
// (the usual page; an index is never changed once made, so records share
// it), else a new one. The first of two models of one name is found.
func (g *good) indexModels(prev *good, same bool) {
	switch {
	case len(g.models) <= indexMin:
		g.index = nil
		return
	case same:
		g.index = prev.index
		return
	}
	g.index = make(map[string]int, len(g.models))
	for i := range g.models {
		if _, ok := g.index[g.models[i].Name]; !ok {
			g.index[g.models[i].Name] = i
		}
	}
}

// large reports whether g's memory is more than a small page's.
func (g *good) large() bool {
	return cap(g.models) > maxSpareModels || cap(g.slo.windows) > maxSpareModels
}
