// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// TestTenantPagesRetainAtMostMaxPodBytes records, for 200 pods, pages a
// tenant controls, each pod's names its own, scraped every 5 s until the
// latency windows are full, and checks the heap the store keeps per pod
// after a collection against the per-pod bound.
func TestTenantPagesRetainAtMostMaxPodBytes(t *testing.T) {
	const pods = 200
	real := realPage(t)
	for _, tt := range []struct {
		name  string
		steps int
		page  func(pod, step int) *parse.Page
	}{
		{"256 models of 1 KiB names", 2, func(pod, step int) *parse.Page {
			return tenantPage(podN(pod).Name, 256, 1024, 0, 0, step)
		}},
		{"8 models of 4 histograms of 40 buckets", 13, func(pod, step int) *parse.Page {
			return tenantPage(podN(pod).Name, 8, 32, 8, parse.MaxBuckets, step)
		}},
		{"the most the budget keeps, the windows' buckets on the fewest models", 13, func(pod, step int) *parse.Page {
			return largestPage(podN(pod).Name, parse.MaxBuckets, step)
		}},
		{"the most the budget keeps, the windows' buckets on the most models", 13, func(pod, step int) *parse.Page {
			return largestPage(podN(pod).Name, MaxWindowBuckets/MaxWindowModels/int(catalog.NumLatencies), step)
		}},
		{"the real vLLM V1 page", 13, func(int, int) *parse.Page { return real }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Two collections: the spare records pooled for reuse
			// (Store.spares) are dropped only at the second.
			runtime.GC()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s := New()
			for step := range tt.steps {
				at := time.Unix(1000, 0).Add(time.Duration(step) * 5 * time.Second)
				for i := range pods {
					s.Record(podN(i), at, tt.page(i, step+1), nil)
				}
			}
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / pods
			t.Logf("%d bytes kept per pod", per)
			if per > MaxPodBytes {
				t.Errorf("the store keeps %d bytes per pod, more than MaxPodBytes (%d)", per, MaxPodBytes)
			}
			runtime.KeepAlive(s)
		})
	}
}

// TestPagesPastThePodBudgetAreAbsentWithAReason: a page over the per-pod
// budget of models and model-name bytes keeps none of its models, and a
// model past the budget of latency windows has no percentile; every
// question those would answer is absent with a reason, never 0, and never
// a sum or merge over the models that were kept.
func TestPagesPastThePodBudgetAreAbsentWithAReason(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pod := podN(0)
	first := func(pg *parse.Page) ModelMatcher {
		name := pg.Models[0].Name
		return func(m string) bool { return m == name }
	}
	overModels := fmt.Sprintf("more than the %d models and %d bytes of model names the store keeps per pod", MaxModels, MaxModelNameBytes)
	overWindows := fmt.Sprintf("percentiles are kept for at most %d models and %d histogram buckets per pod", MaxWindowModels, MaxWindowBuckets)
	for _, tt := range []struct {
		name  string
		page  func(step int) *parse.Page
		sig   catalog.Signal
		first bool   // ask about the page's first model only
		want  string // in the detail; "" for a value
	}{
		{"one model more than the budget", func(s int) *parse.Page { return tenantPage("a", MaxModels+1, 8, 0, 0, s) }, catalog.QueueSize, false, overModels},
		{"one model more: the first model alone", func(s int) *parse.Page { return tenantPage("a", MaxModels+1, 8, 0, 0, s) }, catalog.QueueSize, true, overModels},
		{"one model more: a rate", func(s int) *parse.Page { return tenantPage("a", MaxModels+1, 8, 0, 0, s) }, catalog.GenerationTokensPerSecond, false, overModels},
		{"one model more: a percentile", func(s int) *parse.Page { return tenantPage("a", MaxModels+1, 8, 1, 4, s) }, catalog.TimeToFirstTokenP90, true, overModels},
		{"names one byte over the budget", func(s int) *parse.Page { return namesPage(MaxModelNameBytes+1, s) }, catalog.QueueSize, true, overModels},
		{"256 models of 1 KiB names", func(s int) *parse.Page { return tenantPage("a", 256, 1024, 0, 0, s) }, catalog.QueueSize, false, overModels},
		{"the budget's models and names: served", func(s int) *parse.Page { return namesPage(MaxModelNameBytes, s) }, catalog.QueueSize, false, ""},
		{"the budget's models and names: a rate", func(s int) *parse.Page { return namesPage(MaxModelNameBytes, s) }, catalog.GenerationTokensPerSecond, false, ""},
		{"a ninth model's histograms: no merge of the first eight", func(s int) *parse.Page { return tenantPage("a", MaxWindowModels+1, 8, MaxWindowModels+1, 4, s) }, catalog.TimeToFirstTokenP90, false, overWindows},
		{"a ninth model's histograms: the first model's percentile", func(s int) *parse.Page { return tenantPage("a", MaxWindowModels+1, 8, MaxWindowModels+1, 4, s) }, catalog.TimeToFirstTokenP90, true, ""},
		{"buckets past the budget: no merge", func(s int) *parse.Page { return tenantPage("a", 3, 8, 3, parse.MaxBuckets, s) }, catalog.TimeToFirstTokenP90, false, overWindows},
		{"buckets past the budget: the first model's percentile", func(s int) *parse.Page { return tenantPage("a", 3, 8, 3, parse.MaxBuckets, s) }, catalog.TimeToFirstTokenP90, true, ""},
		{"models without histograms past the eighth: merged", func(s int) *parse.Page { return tenantPage("a", 20, 8, 2, 4, s) }, catalog.TimeToFirstTokenP90, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			var match ModelMatcher
			for step := range 2 {
				pg := tt.page(step + 1)
				if tt.first {
					match = first(pg)
				}
				s.Record(pod, t0.Add(time.Duration(step)*5*time.Second), pg, nil)
			}
			got := s.Get(pod, tt.sig, match, t0.Add(5*time.Second), time.Minute)
			switch {
			case tt.want == "" && got.Status != OK:
				t.Errorf("%s = %v %v (%s), want a value", tt.sig.Name(), got.Value, got.Status, got.Detail)
			case tt.want != "" && (got.Status != Absent || !strings.Contains(got.Detail, tt.want)):
				t.Errorf("%s = %v %v (%s), want absent saying %q", tt.sig.Name(), got.Value, got.Status, got.Detail, tt.want)
			}
		})
	}
}

// TestModelsAndAdaptersOfAPagePastTheBudget: the model list and the LoRA
// adapters of a page over the budget are not kept, and the adapter
// question says why rather than "no such series".
func TestModelsAndAdaptersOfAPagePastTheBudget(t *testing.T) {
	pg := tenantPage("a", MaxModels, 8, 0, 0, 1)
	lora := parse.Model{Adapters: []parse.Adapter{{Name: "chat", Running: true}}}
	lora.Has = lora.Has.Add(catalog.LoRAAdaptersRunning).Add(catalog.LoRAAdaptersWaiting)
	pg.Models = append(pg.Models, lora) // one more than the budget
	s := New()
	t0 := time.Unix(1000, 0)
	s.Record(podN(0), t0, pg, nil)
	if got := s.Models(podN(0)); got != nil {
		t.Errorf("Models = %d names, want none kept", len(got))
	}
	got := s.Adapter(podN(0), AdaptersRunning, nil, t0, time.Minute)
	if got.Status != Absent || !strings.Contains(got.Detail, "the store keeps per pod") {
		t.Errorf("Adapter = %v %v (%s), want absent saying the page was over the budget", got.Value, got.Status, got.Detail)
	}
}

// namesPage is a page of MaxModels models whose names add up to nameBytes.
func namesPage(nameBytes, step int) *parse.Page {
	pg := tenantPage("n", MaxModels, nameBytes/MaxModels, 0, 0, step)
	for i := range nameBytes % MaxModels {
		pg.Models[i].Name += "y"
	}
	return pg
}

// largestPage is a page at the budget: MaxModels models whose names add up
// to MaxModelNameBytes, histograms of buckets buckets on as many models as
// the windows' budget keeps, and parse.MaxAdapters adapters of the longest
// names, all made afresh for tag.
func largestPage(tag string, buckets, step int) *parse.Page {
	pg := tenantPage(tag, MaxModels, MaxModelNameBytes/MaxModels, min(MaxWindowModels, MaxWindowBuckets/(buckets*int(catalog.NumLatencies))), buckets, step)
	m := &pg.Models[MaxModels-1]
	m.Has = m.Has.Add(catalog.LoRAAdaptersRunning).Add(catalog.LoRAAdaptersWaiting)
	for i := range parse.MaxAdapters {
		name := fmt.Sprintf("%s-adapter-%d-", tag, i)
		m.Adapters = append(m.Adapters, parse.Adapter{Name: name + strings.Repeat("a", parse.MaxAdapterNameBytes-len(name)), Running: true})
	}
	return pg
}

// TestConcurrentRecordsOfOnePodKeepTheNewestPage: Records of one pod built
// at once outside the store's lock (small and large pages, so that spare
// records change hands), with readers and Retain running, leave the newest
// page's value, and never a mix (run with -race).
func TestConcurrentRecordsOfOnePodKeepTheNewestPage(t *testing.T) {
	s := New()
	pod := podN(0)
	t0 := time.Unix(1000, 0)
	const writers, perWriter = 4, 200
	reals := make([]*parse.Page, writers) // a Page is its parser's: one each
	for w := range reals {
		reals[w] = realPage(t)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				n := 1 + (w+i)%12 // across the small and large spares
				step := i*writers + w
				s.Record(pod, t0.Add(time.Duration(step)*time.Second), tenantPage("c", n, 8, min(n, 2), 4, step+1), nil)
				s.Record(podN(1+w), t0.Add(time.Duration(step)*time.Second), reals[w], nil)
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for p := range writers + 1 {
				s.Get(podN(p), catalog.QueueSize, nil, t0.Add(time.Hour), 2*time.Hour)
				s.Get(podN(p), catalog.GenerationTokensPerSecond, nil, t0.Add(time.Hour), 2*time.Hour)
				s.Window(podN(p), catalog.TimeToFirstTokenP90, nil, t0.Add(time.Hour), 2*time.Hour)
			}
			s.Retain(t0, func(p types.NamespacedName) bool { return p != podN(writers+1) })
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	last := (perWriter-1)*writers + writers - 1
	wantModels := 1 + (writers-1+perWriter-1)%12
	got := s.Get(pod, catalog.QueueSize, nil, t0.Add(time.Duration(last)*time.Second), time.Minute)
	if got.Status != OK || got.Value != float64(wantModels) || !got.Time.Equal(t0.Add(time.Duration(last)*time.Second)) {
		t.Errorf("queue = %v %v at %v (%s), want %d (the newest page's models, each queue 1) at %v", got.Value, got.Status, got.Time, got.Detail, wantModels, t0.Add(time.Duration(last)*time.Second))
	}
}
