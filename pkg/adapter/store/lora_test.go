// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// loraModel is the model "" of a vLLM page with a vllm:lora_requests_info line.
func loraModel(cut bool, adapters ...parse.Adapter) parse.Model {
	m := parse.Model{Adapters: adapters, AdaptersCut: cut}
	m.Has = m.Has.Add(catalog.LoRAAdaptersRunning).Add(catalog.LoRAAdaptersWaiting)
	return m
}

func TestAdapter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	named := func(name string) AdapterMatcher { return func(n string) bool { return n == name } }
	page := func(models ...parse.Model) func(s *Store) {
		return func(s *Store) {
			s.Record(pod, t0, &parse.Page{Server: parse.VLLMV1, Models: models}, nil)
		}
	}
	sql := parse.Adapter{Name: "sql", Waiting: true}
	chat := parse.Adapter{Name: "chat", Running: true}
	cases := []struct {
		name   string
		record func(s *Store)
		list   AdapterList
		match  AdapterMatcher
		now    time.Time
		want   float64
		status Status
	}{
		{name: "never scraped", record: func(*Store) {}, list: AdaptersWaiting, match: named("sql"), now: t0, status: NotScraped},
		{name: "no lora line: absent, not 0", record: page(mdl("base", 3, 0.1)), list: AdaptersWaiting, match: named("sql"), now: t0, status: Absent},
		{name: "named adapter waits", record: page(mdl("base", 3, 0.1), loraModel(false, sql, chat)), list: AdaptersWaiting, match: named("sql"), now: t0, want: 1, status: OK},
		{name: "named adapter runs", record: page(loraModel(false, sql, chat)), list: AdaptersRunning, match: named("chat"), now: t0, want: 1, status: OK},
		{name: "running, not waiting: 0", record: page(loraModel(false, sql, chat)), list: AdaptersWaiting, match: named("chat"), now: t0, want: 0, status: OK},
		{name: "not named on a complete line: 0", record: page(loraModel(false, sql, chat)), list: AdaptersWaiting, match: named("code"), now: t0, want: 0, status: OK},
		{name: "empty line: 0", record: page(loraModel(false)), list: AdaptersRunning, match: named("code"), now: t0, want: 0, status: OK},
		{name: "not named on a cut line: absent", record: page(loraModel(true, sql)), list: AdaptersWaiting, match: named("code"), now: t0, status: Absent},
		{name: "named on a cut line: 1", record: page(loraModel(true, sql)), list: AdaptersWaiting, match: named("sql"), now: t0, want: 1, status: OK},
		{name: "no matcher: any adapter", record: page(loraModel(false, chat)), list: AdaptersRunning, now: t0, want: 1, status: OK},
		{name: "stale", record: page(loraModel(false, sql)), list: AdaptersWaiting, match: named("sql"), now: t0.Add(16 * time.Second), status: Stale},
		{name: "failed", record: func(s *Store) {
			page(loraModel(false, sql))(s)
			s.Record(pod, t0.Add(10*time.Second), nil, errors.New("timeout"))
		}, list: AdaptersWaiting, match: named("sql"), now: t0.Add(16 * time.Second), status: Failed},
		{name: "the latest page only", record: func(s *Store) {
			page(loraModel(false, sql))(s)
			s.Record(pod, t0.Add(time.Second), &parse.Page{Server: parse.VLLMV1, Models: []parse.Model{loraModel(false, chat)}}, nil)
		}, list: AdaptersWaiting, match: named("sql"), now: t0.Add(time.Second), want: 0, status: OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			tc.record(s)
			got := s.Adapter(pod, tc.list, tc.match, tc.now, 15*time.Second)
			if got.Status != tc.status || got.Value != tc.want {
				t.Errorf("got %v %v (%s), want %v %v", got.Value, got.Status, got.Detail, tc.want, tc.status)
			}
		})
	}
}

// Record copies the adapters: the parser reuses its memory for the next page.
func TestRecordCopiesAdapters(t *testing.T) {
	s := New()
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	at := time.Unix(1000, 0)
	adapters := []parse.Adapter{{Name: "sql", Waiting: true}}
	s.Record(pod, at, &parse.Page{Server: parse.VLLMV1, Models: []parse.Model{loraModel(false, adapters...)}}, nil)
	adapters[0] = parse.Adapter{Name: "other", Running: true}
	got := s.Adapter(pod, AdaptersWaiting, func(n string) bool { return n == "sql" }, at, time.Minute)
	if got.Status != OK || got.Value != 1 {
		t.Errorf("after the page's memory changed: %v %v (%s), want 1 ok", got.Value, got.Status, got.Detail)
	}
}
