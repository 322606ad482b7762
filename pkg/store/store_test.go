package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"
)

func mdl(name string, q, kv float64) parse.Model {
	m := parse.Model{Name: name}
	m.Values[signals.QueueSize], m.Values[signals.KVCacheUsage] = q, kv
	m.Has = m.Has.Add(signals.QueueSize).Add(signals.KVCacheUsage)
	return m
}

func TestGet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	only := func(name string) ModelMatcher { return func(m string) bool { return m == name } }
	cases := []struct {
		name   string
		record func(s *Store)
		sig    signals.Signal
		match  ModelMatcher
		now    time.Time
		want   float64
		status Status
		wantAt time.Time
	}{
		{name: "never scraped", record: func(*Store) {}, sig: signals.QueueSize, now: t0, status: NotScraped},
		{name: "sum over models", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: signals.QueueSize, now: t0.Add(time.Second), want: 5, status: OK, wantAt: t0},
		{name: "max over models", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: signals.KVCacheUsage, now: t0, want: 0.7, status: OK, wantAt: t0},
		{name: "one model", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1), mdl("b", 3, 0.7)}}, nil)
		}, sig: signals.QueueSize, match: only("a"), now: t0, want: 2, status: OK, wantAt: t0},
		{name: "no such model", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: signals.QueueSize, match: only("z"), now: t0, status: Absent, wantAt: t0},
		{name: "series absent", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: signals.BatchSize, now: t0, status: Absent, wantAt: t0},
		{name: "zero is a value", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 0, 0)}}, nil) }, sig: signals.QueueSize, now: t0, want: 0, status: OK, wantAt: t0},
		{name: "stale", record: func(s *Store) { s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil) }, sig: signals.QueueSize, now: t0.Add(16 * time.Second), status: Stale, wantAt: t0},
		{name: "failure hides the older value", record: func(s *Store) {
			s.Record(pod, t0, &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}, nil)
			s.Record(pod, t0.Add(time.Second), nil, errors.New("timeout"))
		}, sig: signals.QueueSize, now: t0.Add(time.Second), status: Failed, wantAt: t0.Add(time.Second)},
		{name: "older outcome never overwrites newer", record: func(s *Store) {
			s.Record(pod, t0.Add(time.Second), &parse.Page{Models: []parse.Model{mdl("a", 9, 0.1)}}, nil)
			s.Record(pod, t0, nil, errors.New("late failure"))
		}, sig: signals.QueueSize, now: t0.Add(time.Second), want: 9, status: OK, wantAt: t0.Add(time.Second)},
		{name: "gpu never reported", record: func(s *Store) { s.Record(pod, t0, &parse.Page{}, nil) }, sig: signals.GPUUtilization, now: t0, status: NotScraped},
		{name: "gpu value", record: func(s *Store) {
			g := GPU{GPUs: 2, Has: signals.Set(0).Add(signals.GPUUtilization)}
			g.Values[signals.GPUUtilization] = 0.97
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: g})
		}, sig: signals.GPUUtilization, now: t0, want: 0.97, status: OK, wantAt: t0},
		{name: "gpu SM activity unsupported is absent, not zero", record: func(s *Store) {
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: {GPUs: 1, Has: signals.Set(0).Add(signals.GPUUtilization)}})
		}, sig: signals.GPUSMActive, now: t0, status: Absent, wantAt: t0},
		{name: "gpu stale", record: func(s *Store) {
			s.RecordGPU(t0, map[types.NamespacedName]GPU{pod: {GPUs: 1, Has: signals.Set(0).Add(signals.GPUUtilization)}})
		}, sig: signals.GPUUtilization, now: t0.Add(time.Minute), status: Stale, wantAt: t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			tc.record(s)
			got := s.Get(pod, tc.sig, tc.match, tc.now, 15*time.Second)
			if got.Status != tc.status || got.Value != tc.want || !got.Time.Equal(tc.wantAt) {
				t.Fatalf("got %+v, want value %v status %s at %s", got, tc.want, tc.status, tc.wantAt)
			}
			if got.Status != OK && got.Status != NotScraped && got.Detail == "" {
				t.Errorf("status %s without detail", got.Status)
			}
		})
	}
}

func TestRecordCopiesThePage(t *testing.T) {
	s := New()
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	pg := &parse.Page{Models: []parse.Model{mdl("a", 2, 0.1)}}
	s.Record(pod, time.Unix(100, 0), pg, nil)
	pg.Models[0].Values[signals.QueueSize] = 99
	if got := s.Get(pod, signals.QueueSize, nil, time.Unix(100, 0), time.Minute); got.Value != 2 {
		t.Fatalf("store shares the caller's page: got %v", got.Value)
	}
}

func TestRetain(t *testing.T) {
	s := New()
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	s.Record(a, time.Unix(1, 0), &parse.Page{}, nil)
	s.Record(b, time.Unix(1, 0), &parse.Page{}, nil)
	s.Retain(func(p types.NamespacedName) bool { return p == a })
	if !s.Scraped(a) || s.Scraped(b) || s.Len() != 1 {
		t.Fatalf("retain kept the wrong pods: a=%v b=%v len=%d", s.Scraped(a), s.Scraped(b), s.Len())
	}
}

func TestCollector(t *testing.T) {
	s := New()
	t0 := time.Unix(1000, 0)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "ok"}, t0, &parse.Page{}, nil)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "old"}, t0.Add(-time.Minute), &parse.Page{}, nil)
	s.Record(types.NamespacedName{Namespace: "ns", Name: "bad"}, t0, nil, errors.New("refused"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(s, 15*time.Second, func() time.Time { return t0 }))
	want := `
# HELP inference_metrics_adapter_pods Target pods by the status of their latest model-server sample: ok, stale (older than --max-age), failed (latest scrape failed), not_scraped (not scraped yet).
# TYPE inference_metrics_adapter_pods gauge
inference_metrics_adapter_pods{status="failed"} 1
inference_metrics_adapter_pods{status="not_scraped"} 0
inference_metrics_adapter_pods{status="ok"} 1
inference_metrics_adapter_pods{status="stale"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
