package provider

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/targets"
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
	checkDiscovery(t, []string{catalog.FrontDoorPendingRequests}, "services", "inferencepools.inference.networking.k8s.io")
}
