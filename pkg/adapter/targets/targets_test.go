// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

func testPod(name string, ann map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann, Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

func TestEndpoint(t *testing.T) {
	cases := []struct {
		name    string
		pod     *corev1.Pod
		want    string
		wantErr bool
	}{
		{"annotation port and path", testPod("p", map[string]string{AnnotationPort: "9090", AnnotationPath: "/stats"}, corev1.ContainerPort{Name: "metrics", ContainerPort: 1}), "http://10.0.0.1:9090/stats", false},
		{"named metrics port wins over http", testPod("p", nil, corev1.ContainerPort{Name: "http", ContainerPort: 8000}, corev1.ContainerPort{Name: "metrics", ContainerPort: 8001}), "http://10.0.0.1:8001/metrics", false},
		{"http port", testPod("p", nil, corev1.ContainerPort{Name: "grpc", ContainerPort: 9000}, corev1.ContainerPort{Name: "http", ContainerPort: 8000}), "http://10.0.0.1:8000/metrics", false},
		{"first port", testPod("p", nil, corev1.ContainerPort{Name: "grpc", ContainerPort: 9000}), "http://10.0.0.1:9000/metrics", false},
		{"no port", testPod("p", nil), "", true},
		{"bad port annotation", testPod("p", map[string]string{AnnotationPort: "http"}), "", true},
		{"port out of range", testPod("p", map[string]string{AnnotationPort: "70000"}), "", true},
		{"relative path", testPod("p", map[string]string{AnnotationPort: "1", AnnotationPath: "metrics"}), "", true},
		{"longest path", testPod("p", map[string]string{AnnotationPort: "1", AnnotationPath: "/" + strings.Repeat("a", MaxPathLen-1)}), "http://10.0.0.1:1/" + strings.Repeat("a", MaxPathLen-1), false},
		{"path too long", testPod("p", map[string]string{AnnotationPort: "1", AnnotationPath: "/" + strings.Repeat("a", MaxPathLen)}), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Endpoint(tc.pod)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Endpoint = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	// An annotation's value is quoted in the error cut short, whatever
	// its size.
	for _, ann := range []map[string]string{
		{AnnotationPort: strings.Repeat("x", 1<<20)},
		{AnnotationPort: "1", AnnotationPath: strings.Repeat("x", 1<<20)},
		{AnnotationPort: "1", AnnotationPath: "/" + strings.Repeat("x", 1<<20)},
	} {
		_, err := Endpoint(testPod("p", ann))
		if err == nil || len(err.Error()) > 200 {
			t.Errorf("Endpoint with a 1 MiB annotation: error of %d bytes, want an error of at most 200", len(fmt.Sprint(err)))
		}
	}
	v6 := testPod("p", nil, corev1.ContainerPort{ContainerPort: 8000})
	v6.Status.PodIP = "fd00::1"
	if got, _ := Endpoint(v6); got != "http://[fd00::1]:8000/metrics" {
		t.Fatalf("IPv6 endpoint %q", got)
	}
}

func TestForcedServer(t *testing.T) {
	custom, err := parse.NewServers([]parse.CustomServer{{Name: "ollama", Queue: parse.Series{Name: "ollama_queue"}}})
	if err != nil {
		t.Fatal(err)
	}
	ollama, _ := custom.ByName("ollama")
	tests := []struct {
		annotation string
		servers    *parse.Servers
		want       parse.Server
		wantErr    bool
	}{
		{"", nil, parse.Unknown, false},
		{"tgi", nil, parse.TGI, false},
		{"tgi", custom, parse.TGI, false},
		{"ollama", nil, parse.Unknown, true},
		{"ollama", custom, ollama, false},
		{"unknown", custom, parse.Unknown, true},
		{"Ollama", custom, parse.Unknown, true},
	}
	for _, tt := range tests {
		got, err := ForcedServer(testPod("p", map[string]string{AnnotationServer: tt.annotation}), tt.servers)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%q (custom: %v): got %v, %v; want %v, error %v", tt.annotation, tt.servers.Custom(), got, err, tt.want, tt.wantErr)
		}
	}
}

type recSetter struct{ last []scrape.Target }

func (r *recSetter) SetTargets(ts []scrape.Target) { r.last = ts }

type recProber struct{ scraped []string }

func (r *recProber) ScrapeNow(_ context.Context, ts []scrape.Target) {
	for _, t := range ts {
		r.scraped = append(r.scraped, t.Pod.Name)
	}
}

type knownSet map[string]bool

func (k knownSet) Scraped(p types.NamespacedName) bool { return k[p.Name] }

type retained struct{ kept []string }

func (r *retained) Retain(_ time.Time, keep func(types.NamespacedName) bool) {
	r.kept = nil
	for _, n := range []string{"a", "b", "optin", "pending", "gone"} {
		if keep(types.NamespacedName{Namespace: "ns", Name: n}) {
			r.kept = append(r.kept, n)
		}
	}
}

// podIndex returns a pod cache holding pods, each given its own IP.
func podIndex(t testing.TB, pods ...*corev1.Pod) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i, p := range pods {
		if p.Status.PodIP != "" {
			p.Status.PodIP = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
		}
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

func names(ts []scrape.Target) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Pod.Name)
	}
	return fmt.Sprint(out)
}

func TestTrackerDemandAndOptIn(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	a := testPod("a", nil, port)
	b := testPod("b", nil, port)
	optin := testPod("optin", map[string]string{AnnotationScrape: "true"}, port)
	pending := testPod("pending", map[string]string{AnnotationScrape: "true"}, port)
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	idx := podIndex(t, a, b, optin, pending)
	clk := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	setter, prober, ret := &recSetter{}, &recProber{}, &retained{}
	tr := New(Config{DemandTTL: time.Minute, FirstScrapeTimeout: time.Second, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{setter, prober}, testStore{knownSet{"b": true}, ret}, clk)

	tr.Reconcile()
	if got := names(setter.last); got != "[optin]" {
		t.Fatalf("before any question targets are %s, want only the opted-in pod", got)
	}
	tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "a"}), []*corev1.Pod{a})
	tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "b"}), []*corev1.Pod{b})
	if fmt.Sprint(prober.scraped) != "[a]" {
		t.Fatalf("first scrape of %v, want only the never-scraped pod a", prober.scraped)
	}
	tr.Reconcile()
	if got := names(setter.last); got != "[a b optin]" {
		t.Fatalf("targets %s", got)
	}
	if fmt.Sprint(ret.kept) != "[a b optin]" {
		t.Fatalf("store kept %v", ret.kept)
	}

	// Pod b is deleted: it stops being a target.
	if err := idx.Delete(b); err != nil {
		t.Fatal(err)
	}
	tr.Reconcile()
	if got := names(setter.last); got != "[a optin]" {
		t.Fatalf("after delete targets %s", got)
	}

	// Demand expires after the TTL without questions.
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	tr.Reconcile()
	if got := names(setter.last); got != "[optin]" {
		t.Fatalf("after TTL targets %s", got)
	}
}

// A pod annotated with a custom server's name becomes a target forced to it.
func TestTrackerCustomServer(t *testing.T) {
	custom, err := parse.NewServers([]parse.CustomServer{{Name: "my-server", Queue: parse.Series{Name: "my_queue"}}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := custom.ByName("my-server")
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	p := testPod("p", map[string]string{AnnotationScrape: "true", AnnotationServer: "my-server"}, port)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := idx.Add(p); err != nil {
		t.Fatal(err)
	}
	setter := &recSetter{}
	tr := New(Config{DemandTTL: time.Minute, Resync: time.Second, Servers: custom}, corelisters.NewPodLister(idx), testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Reconcile()
	if len(setter.last) != 1 || setter.last[0].Server != want {
		t.Fatalf("targets %+v, want p forced to my-server (%d)", setter.last, want)
	}
}

func TestWantNothingRegistersNoDemand(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	bare := testPod("bare", nil, port)
	bare.Labels = nil
	other := testPod("other", nil, port)
	idx := podIndex(t, bare, other)
	setter, prober := &recSetter{}, &recProber{}
	tr := New(Config{DemandTTL: time.Minute, FirstScrapeTimeout: time.Second, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{setter, prober}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Want(context.Background(), "ns", labels.Nothing(), []*corev1.Pod{bare})
	if fmt.Sprint(prober.scraped) != "[bare]" {
		t.Fatalf("scraped %v, want the asked-about pod once", prober.scraped)
	}
	tr.Reconcile()
	if got := names(setter.last); got != "[]" {
		t.Fatalf("targets %s: a selector of nothing must not make the namespace wanted", got)
	}
}

// testScraper and testStore make the tracker's role interfaces of separate
// fakes.
type testScraper struct {
	Setter
	Prober
}

type testStore struct {
	Known
	Forgetter
}

// TestMaxBatchSize: only a finite, positive number is a maximum batch size;
// "Inf" and "NaN", which strconv.ParseFloat takes, are not (batch ÷ +Inf
// would be a fake 0).
func TestMaxBatchSize(t *testing.T) {
	for _, tc := range []struct {
		ann    string
		want   float64
		wantOK bool
	}{
		{"256", 256, true},
		{" 8 ", 8, true},
		{"0.5", 0.5, true},
		{"0", 0, false},
		{"-4", 0, false},
		{"abc", 0, false},
		{"Inf", 0, false},
		{"+infinity", 0, false},
		{"NaN", 0, false},
	} {
		got, ok := MaxBatchSize(testPod("p", map[string]string{AnnotationMaxBatchSize: tc.ann}))
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("MaxBatchSize(%q) = %v, %v; want %v, %v", tc.ann, got, ok, tc.want, tc.wantOK)
		}
	}
	if _, ok := MaxBatchSize(testPod("p", nil)); ok {
		t.Error("MaxBatchSize without the annotation: ok")
	}
}
