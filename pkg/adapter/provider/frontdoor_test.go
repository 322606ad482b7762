// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// frontDoorPage is what a front door's page parses to: its held requests as
// the queue, per model.
func frontDoorPage(models map[string]float64) *parse.Page {
	pg := &parse.Page{Server: parse.GIEEPP}
	for name, q := range models {
		m := parse.Model{Name: name}
		m.Values[catalog.QueueSize] = q
		m.Has = m.Has.Add(catalog.QueueSize)
		pg.Models = append(pg.Models, m)
	}
	return pg
}

// door is a front-door pod of service in namespace ns.
func door(ns, name, service string, ready bool) *corev1.Pod {
	p := pod(name, map[string]string{"app": "router"}, true, ready, map[string]string{targets.AnnotationFrontDoor: service})
	p.Namespace = ns
	return p
}

// TestFrontDoorMetric: inference_front_door_pending_requests on a Service
// is the sum of the held requests over the Ready pods of its namespace that
// name it in their front-door annotation. Missing, stale, not Ready, other
// Services' and other namespaces' front doors are never counted, and no
// value is ever made up as 0.
func TestFrontDoorMetric(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-2 * time.Second)
	st := store.New()
	rec := func(ns, name string, at time.Time, models map[string]float64) {
		st.Record(types.NamespacedName{Namespace: ns, Name: name}, at, frontDoorPage(models), nil)
	}
	rec("ns", "r1", fresh, map[string]float64{"llama": 3, "qwen": 1})
	rec("ns", "r2", fresh, map[string]float64{"llama": 4})
	rec("ns", "idle", fresh, map[string]float64{"llama": 0})
	rec("ns", "stale", now.Add(-time.Minute), map[string]float64{"llama": 9})
	rec("ns", "loading", fresh, map[string]float64{"llama": 50})
	rec("ns", "other-svc", fresh, map[string]float64{"llama": 70})
	rec("tenant-b", "intruder", fresh, map[string]float64{"llama": 1000})
	rec("ns", "lonely-ready", fresh, map[string]float64{"llama": 2})
	rec("ns", "epp", fresh, map[string]float64{"llama": 5})
	st.Record(types.NamespacedName{Namespace: "ns", Name: "model-0"}, fresh, page(model("llama", 8, 4, 0.5)), nil)

	f := fixture{now: now, store: st, pods: []*corev1.Pod{
		door("ns", "r1", "llm", true),
		door("ns", "r2", "llm", true),
		door("ns", "loading", "llm", false), // not Ready: left out although it has a value
		door("ns", "other-svc", "chat", true),
		door("tenant-b", "intruder", "llm", true), // same Service name, other namespace
		door("ns", "idle", "idle", true),
		door("ns", "stale", "stale", true),
		door("ns", "never", "partial", true), // Ready, never scraped
		door("ns", "lonely-ready", "partial", true),
		door("ns", "unready-only", "warming", false),
		door("ns", "epp", "inferencepool/pool", true),                    // the endpoint picker of InferencePool pool
		pod("model-0", map[string]string{"app": "llm"}, true, true, nil), // the model server is no front door
	}}
	srv, _ := newServer(t, f)
	base := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"
	metric := "/" + catalog.FrontDoorPendingRequests
	modelSel := func(m string) string { return "?metricLabelSelector=" + url.QueryEscape("model_name="+m) }

	cases := []struct {
		name    string
		path    string
		code    int
		want    string // the value
		wantErr string
		kind    string // of the described object; "" means Service
	}{
		{name: "sum over the Ready front doors of the namespace", path: base + "ns/services/llm" + metric, code: 200, want: "8"},
		{name: "model selector", path: base + "ns/services/llm" + metric + modelSel("llama"), code: 200, want: "7"},
		{name: "a measured zero is served", path: base + "ns/services/idle" + metric, code: 200, want: "0"},
		{name: "other namespace's pods never counted", path: base + "tenant-b/services/llm" + metric, code: 200, want: "1k"},
		{name: "no front door", path: base + "ns/services/nobody" + metric, code: 404, wantErr: "no Running pod in namespace"},
		{name: "stale front door", path: base + "ns/services/stale" + metric, code: 404, wantErr: "1 stale"},
		{name: "a Ready front door without a value makes the sum absent", path: base + "ns/services/partial" + metric, code: 404, wantErr: "1 of 2 Ready front-door pods have no value"},
		{name: "no Ready front door", path: base + "ns/services/warming" + metric, code: 404, wantErr: "1 front-door pods, none Ready"},
		{name: "a model server's annotation-free pods are not a front door", path: base + "ns/services/model-0" + metric, code: 404, wantErr: "no Running pod in namespace"},
		{name: "services serve only the front-door metric", path: base + "ns/services/llm/inference_queue_size", code: 404, wantErr: "services serve only"},
		{name: "pods do not serve the front-door metric", path: base + "ns/pods/r1" + metric, code: 404, wantErr: "is served on services"},
		{name: "deployments do not serve it", path: base + "ns/deployments.apps/llm" + metric, code: 404, wantErr: "is served on services"},
		{name: "services by selector are refused", path: base + "ns/services/*" + metric + "?labelSelector=app%3Dllm", code: 404, wantErr: "answered one by name"},
		{name: "an InferencePool's endpoint picker", path: base + "ns/inferencepools.inference.networking.k8s.io/pool" + metric, code: 200, want: "5", kind: "InferencePool"},
		{name: "an InferencePool of the v1alpha2 group", path: base + "ns/inferencepools.inference.networking.x-k8s.io/pool" + metric, code: 200, want: "5", kind: "InferencePool"},
		{name: "a pool's front door is not a Service's", path: base + "ns/services/pool" + metric, code: 404, wantErr: "no Running pod in namespace"},
		{name: "a Service's front door is not a pool's", path: base + "ns/inferencepools.inference.networking.k8s.io/llm" + metric, code: 404, wantErr: "front-door-for=inferencepool/llm"},
		{name: "another namespace's pool", path: base + "tenant-b/inferencepools.inference.networking.k8s.io/pool" + metric, code: 404, wantErr: "no Running pod in namespace"},
		{name: "inferencepools by selector are refused", path: base + "ns/inferencepools.inference.networking.k8s.io/*" + metric + "?labelSelector=app%3Dllm", code: 404, wantErr: "answered one by name"},
		{name: "inferencepools serve only the front-door metric", path: base + "ns/inferencepools.inference.networking.k8s.io/pool/inference_queue_size", code: 404, wantErr: "serve only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
			if code != tc.code {
				t.Fatalf("status %d, want %d; body %s", code, tc.code, body)
			}
			if tc.code != 200 {
				if !strings.Contains(body, tc.wantErr) {
					t.Fatalf("body %s does not say %q", body, tc.wantErr)
				}
				return
			}
			var list struct{ Items []valueJSON }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 {
				t.Fatalf("%d items, want 1: %s", len(list.Items), body)
			}
			it := list.Items[0]
			if it.Value != tc.want {
				t.Errorf("value %s, want %s", it.Value, tc.want)
			}
			kind := tc.kind
			if kind == "" {
				kind = "Service"
			}
			if it.DescribedObject.Kind != kind || it.Metric.Name != catalog.FrontDoorPendingRequests {
				t.Errorf("described %+v, metric %q: want a %s and %s", it.DescribedObject, it.Metric.Name, kind, catalog.FrontDoorPendingRequests)
			}
			if !it.Timestamp.Equal(fresh) {
				t.Errorf("timestamp %s, want the oldest scrape in the sum %s", it.Timestamp, fresh)
			}
		})
	}
}

func TestDiscoveryListsFrontDoorMetric(t *testing.T) {
	checkDiscovery(t, catalog.FrontDoorMetrics(), "services", "inferencepools.inference.networking.k8s.io")
}

// eppPage is an endpoint picker's page as package parse reads it: per
// model its held requests (queue) and requests in flight (batch), and,
// when saturation >= 0, the pool's saturation (batch fill) on model "".
func eppPage(held, running map[string]float64, saturation float64) *parse.Page {
	pg := frontDoorPage(held)
	for i := range pg.Models {
		m := &pg.Models[i]
		if r, ok := running[m.Name]; ok {
			m.Values[catalog.BatchSize] = r
			m.Has = m.Has.Add(catalog.BatchSize)
		}
	}
	if saturation >= 0 {
		m := parse.Model{}
		m.Values[catalog.BatchFill] = saturation
		m.Has = m.Has.Add(catalog.BatchFill)
		pg.Models = append(pg.Models, m)
	}
	return pg
}

// TestFrontDoorEPPSignals: an InferencePool's (or a Service's) requests in
// flight are summed over its Ready endpoint-picker pods, per model with a
// model selector; its pool saturation is the largest of theirs, may exceed
// 1, and is the pool's (a model selector is refused). An endpoint picker
// whose page lacks a signal (an EPP without flow control, or an older one)
// makes it absent with a reason naming the series, never 0; its held
// requests are served whatever the other two.
func TestFrontDoorEPPSignals(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-2 * time.Second)
	st := store.New()
	rec := func(name string, pg *parse.Page) {
		st.Record(types.NamespacedName{Namespace: "ns", Name: name}, fresh, pg, nil)
	}
	rec("epp-0", eppPage(map[string]float64{"llama": 3, "qwen": 1}, map[string]float64{"llama": 10, "qwen": 4}, 0.75))
	rec("epp-1", eppPage(map[string]float64{"llama": 2}, map[string]float64{"llama": 6}, 1.25))
	rec("epp-unready", eppPage(map[string]float64{"llama": 50}, map[string]float64{"llama": 50}, 9))
	rec("old-epp", eppPage(map[string]float64{"llama": 4}, nil, -1))
	rec("svc-door", eppPage(map[string]float64{"llama": 1}, map[string]float64{"llama": 2}, 0.5))
	f := fixture{now: now, store: st, pods: []*corev1.Pod{
		door("ns", "epp-0", "inferencepool/pool", true),
		door("ns", "epp-1", "inferencepool/pool", true),
		door("ns", "epp-unready", "inferencepool/pool", false),
		door("ns", "old-epp", "inferencepool/old", true),
		door("ns", "svc-door", "llm", true),
	}}
	srv, _ := newServer(t, f)
	pool := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/inferencepools.inference.networking.k8s.io/"
	svc := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/services/"
	modelSel := func(m string) string { return "?metricLabelSelector=" + url.QueryEscape("model_name="+m) }
	running, saturation, held := "/"+catalog.FrontDoorRunningRequests, "/"+catalog.FrontDoorPoolSaturation, "/"+catalog.FrontDoorPendingRequests

	cases := []struct {
		name, path, metric string
		code               int
		want, wantErr      string
	}{
		{name: "in flight: summed over the Ready endpoint pickers", path: pool + "pool" + running, metric: catalog.FrontDoorRunningRequests, code: 200, want: "20"},
		{name: "in flight of one model", path: pool + "pool" + running + modelSel("llama"), metric: catalog.FrontDoorRunningRequests, code: 200, want: "16"},
		{name: "a model one picker lacks: absent, not a partial sum", path: pool + "pool" + running + modelSel("qwen"), code: 404, wantErr: "1 of 2 Ready front-door pods have no value"},
		{name: "saturation: the largest, above 1 kept", path: pool + "pool" + saturation, metric: catalog.FrontDoorPoolSaturation, code: 200, want: "1250m"},
		{name: "held requests beside them", path: pool + "pool" + held, metric: catalog.FrontDoorPendingRequests, code: 200, want: "6"},
		{name: "saturation is the pool's, not a model's", path: pool + "pool" + saturation + modelSel("llama"), code: 404, wantErr: "the pool's, not a model's"},
		{name: "no saturation on the page: absent with the series named", path: pool + "old" + saturation, code: 404, wantErr: "llm_d_epp_flow_control_pool_saturation or inference_extension_flow_control_pool_saturation"},
		{name: "no running requests on the page: absent with the series named", path: pool + "old" + running, code: 404, wantErr: "llm_d_epp_request_running or inference_objective_running_requests"},
		{name: "the old picker's held requests are still served", path: pool + "old" + held, metric: catalog.FrontDoorPendingRequests, code: 200, want: "4"},
		{name: "a Service's front door serves them too", path: svc + "llm" + running, metric: catalog.FrontDoorRunningRequests, code: 200, want: "2"},
		{name: "pods do not serve them", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/epp-0" + saturation, code: 404, wantErr: "is served on services"},
		{name: "pools by selector are refused, naming the metric", path: pool + "*" + running + "?labelSelector=app%3Dllm", code: 404, wantErr: "NAME/" + catalog.FrontDoorRunningRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, srv, tc.path)
			if code != tc.code {
				t.Fatalf("status %d, want %d; body %s", code, tc.code, body)
			}
			if tc.code != 200 {
				if !strings.Contains(body, tc.wantErr) {
					t.Fatalf("body %s does not say %q", body, tc.wantErr)
				}
				return
			}
			var list struct{ Items []valueJSON }
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 {
				t.Fatalf("%d items, want 1: %s", len(list.Items), body)
			}
			if it := list.Items[0]; it.Value != tc.want || it.Metric.Name != tc.metric {
				t.Errorf("value %s of %q, want %s of %q", it.Value, it.Metric.Name, tc.want, tc.metric)
			}
		})
	}
}
