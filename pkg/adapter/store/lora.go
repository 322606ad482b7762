// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// AdapterList is one of the two adapter lists of vLLM's
// vllm:lora_requests_info line.
type AdapterList uint8

const (
	// AdaptersRunning is the running_lora_adapters list.
	AdaptersRunning AdapterList = iota
	// AdaptersWaiting is the waiting_lora_adapters list.
	AdaptersWaiting
)

func (l AdapterList) String() string {
	if l == AdaptersWaiting {
		return "waiting"
	}
	return "running"
}

// AdapterMatcher picks LoRA adapters by name; nil matches every adapter.
type AdapterMatcher func(name string) bool

// copyAdapters moves the models' adapters (the parser's memory) into g's
// own, reusing its memory. At most parse.MaxAdapters per page.
func (g *good) copyAdapters() {
	clear(g.adapters[:cap(g.adapters)])
	g.adapters = g.adapters[:0]
	for i := range g.models {
		m := &g.models[i]
		if len(m.Adapters) == 0 {
			m.Adapters = nil
			continue
		}
		start := len(g.adapters)
		g.adapters = append(g.adapters, m.Adapters...)
		m.Adapters = g.adapters[start:len(g.adapters):len(g.adapters)]
	}
}

// Adapter says whether a LoRA adapter that match selects is in list on
// pod's latest good page, as of now: 1 when one is, 0 when the page's
// vllm:lora_requests_info line names every adapter it knows and none
// selected is in list. It is Absent when the page has no such line, and
// when the line named more adapters than were kept (parse.MaxAdapters,
// parse.MaxAdapterNameBytes) and none of the kept ones is in list: an
// adapter left out might be. The line has no model label: all the page's
// models count.
func (s *Store) Adapter(pod types.NamespacedName, list AdapterList, match AdapterMatcher, now time.Time, maxAge time.Duration) Sample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.pods[pod]
	if e == nil {
		return Sample{Status: NotScraped}
	}
	sv := &e.serving
	if st := sv.status(now, maxAge); st != OK {
		return sv.notOK(st, now)
	}
	g := sv.good
	if g.over {
		return Sample{Time: g.at, Status: Absent, Detail: g.overDetail()}
	}
	known, cut := false, false
	for i := range g.models {
		m := &g.models[i]
		if !m.Has.Has(catalog.LoRAAdaptersRunning) {
			continue
		}
		known = true
		cut = cut || m.AdaptersCut
		for _, a := range m.Adapters {
			in := a.Running
			if list == AdaptersWaiting {
				in = a.Waiting
			}
			if in && (match == nil || match(a.Name)) {
				return Sample{Value: 1, Time: g.at, Status: OK}
			}
		}
	}
	switch {
	case !known:
		return Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("page (%s) has no vllm:lora_requests_info series", g.server) + refusedDetail(&g.rejected)}
	case cut:
		return Sample{Time: g.at, Status: Absent, Detail: fmt.Sprintf("no selected adapter is %s among the %d the page's vllm:lora_requests_info line names that were kept (at most %d, of names at most %d bytes), and the line names more", list, len(g.adapters), parse.MaxAdapters, parse.MaxAdapterNameBytes)}
	}
	return Sample{Value: 0, Time: g.at, Status: OK}
}
