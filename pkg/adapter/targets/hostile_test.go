// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

const agentLabel = "app.kubernetes.io/name"

var agentSel = labels.SelectorFromSet(labels.Set{agentLabel: "inference-metrics-adapter-gpu-agent"})

// agentPod is a pod labelled like a gpu-agent in namespace ns on node,
// owned by a DaemonSet when daemonSet is set.
func agentPod(ns, name, node string, daemonSet bool) *corev1.Pod {
	p := testPod(name, nil, corev1.ContainerPort{Name: "metrics", ContainerPort: 9400})
	p.Namespace = ns
	p.Labels = map[string]string{agentLabel: "inference-metrics-adapter-gpu-agent"}
	p.Spec.NodeName = node
	if daemonSet {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "gpu-agent", UID: "ds", Controller: &yes}}
	}
	return p
}

// A pod labelled like an agent is trusted only in the agent namespace and
// only when a DaemonSet controls it; without a namespace nothing is.
// Was wrong: any pod with the agent's label, in any namespace, was an agent.
func TestForgedAgentIsNotATarget(t *testing.T) {
	tests := []struct {
		name      string
		agentNS   string
		pod       *corev1.Pod
		wantAgent bool
	}{
		{"forged agent in a tenant namespace, no agent namespace configured", "", agentPod("tenant", "forged", "n1", true), false},
		{"forged agent in a tenant namespace", "ima", agentPod("tenant", "forged", "n1", true), false},
		{"bare pod in the agent namespace", "ima", agentPod("ima", "bare", "n1", false), false},
		{"DaemonSet pod in the agent namespace", "ima", agentPod("ima", "agent", "n1", true), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setter := &recSetter{}
			tr := New(Config{DemandTTL: time.Minute, Resync: time.Second, AgentSelector: agentSel, AgentNamespace: tc.agentNS},
				corelisters.NewPodLister(podIndex(t, tc.pod)), testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
			tr.Reconcile()
			gotAgent := len(setter.last) == 1 && setter.last[0].Kind == scrape.GPUAgent
			if gotAgent != tc.wantAgent || (!tc.wantAgent && len(setter.last) != 0) {
				t.Fatalf("targets %+v, want agent %v", setter.last, tc.wantAgent)
			}
		})
	}
}

// A trusted agent that reports a pod on another node changes nothing for
// that pod; its report about its own node's pod is stored.
// Was wrong: an agent's values were stored for any pod it named, on any node.
func TestAgentReportsOnlyItsNode(t *testing.T) {
	agent := agentPod("ima", "agent-n1", "n1", true)
	forged := agentPod("tenant", "forged", "n1", false)
	victim := testPod("victim", nil)
	victim.Namespace, victim.Spec.NodeName = "prod", "n2"
	own := testPod("own", nil)
	own.Namespace, own.Spec.NodeName = "prod", "n1"
	lister := corelisters.NewPodLister(podIndex(t, agent, forged, victim, own))

	st := store.New()
	reg := prometheus.NewPedanticRegistry()
	gate := NewAgentGate(AgentTrust{Selector: agentSel, Namespace: "ima"}, lister, st, reg)

	report := func(p *corev1.Pod, util float64) agentpage.PodGPU {
		g := agentpage.PodGPU{Namespace: p.Namespace, Pod: p.Name, GPUs: 1}
		g.Values[catalog.GPUUtilization] = util
		g.Has = g.Has.Add(catalog.GPUUtilization)
		return g
	}
	at := time.Unix(1000, 0)
	gate.RecordAgent(types.NamespacedName{Namespace: "ima", Name: "agent-n1"}, at, []agentpage.PodGPU{report(victim, 0.99), report(own, 0.5)}, nil)
	gate.RecordAgent(types.NamespacedName{Namespace: "tenant", Name: "forged"}, at, []agentpage.PodGPU{report(own, 0.01)}, nil)

	if s := st.Get(types.NamespacedName{Namespace: "prod", Name: "victim"}, catalog.GPUUtilization, nil, at, time.Minute); s.Status == store.OK {
		t.Fatalf("the agent of node n1 wrote GPU values for a pod on node n2: %v", s.Value)
	}
	s := st.Get(types.NamespacedName{Namespace: "prod", Name: "own"}, catalog.GPUUtilization, nil, at, time.Minute)
	if s.Status != store.OK || s.Value != 0.5 {
		t.Fatalf("own pod: %+v, want the trusted agent's 0.5", s)
	}
	if got := testutil.ToFloat64(gate.rejected.WithLabelValues(RejectOtherNode)); got != 1 {
		t.Fatalf("other_node rejections %v, want 1", got)
	}
	if got := testutil.ToFloat64(gate.rejected.WithLabelValues(RejectUntrustedAgent)); got != 1 {
		t.Fatalf("untrusted_agent rejections %v, want 1", got)
	}
}

// Demand never exceeds its bounds; the least recently asked goes first, and
// a busy namespace evicts its own entries rather than small namespaces'.
// Was wrong: every selector asked about became demand, without limit.
func TestDemandBounded(t *testing.T) {
	clk := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	tr := New(Config{DemandTTL: time.Hour, Resync: time.Second, MaxSelectorsPerNamespace: 3, MaxSelectors: 5},
		corelisters.NewPodLister(podIndex(t)), testScraper{&recSetter{}, &recProber{}}, testStore{knownSet{}, &retained{}}, clk)
	ask := func(ns, sel string) {
		clk.SetTime(clk.Now().Add(time.Second))
		tr.Want(context.Background(), ns, labels.SelectorFromSet(labels.Set{"app": sel}), nil)
	}
	ask("small1", "x")
	ask("small2", "y")
	for i := range 100 {
		ask("big", fmt.Sprint(i))
		ask("big", "keep") // asked again each time: never the least recent
		if n, nb := tr.demand.len(""), tr.demand.len("big"); n > 5 || nb > 3 {
			t.Fatalf("after %d selectors: %d entries in total, %d in one namespace; bounds 5 and 3", i+1, n, nb)
		}
	}
	for _, ns := range []string{"small1", "small2"} {
		if tr.demand.len(ns) != 1 {
			t.Fatalf("namespace %s lost its demand to a busy namespace", ns)
		}
	}
	big := tr.demand.ns["big"]
	if _, ok := big.byKey[demandKey{s: "app=keep"}]; !ok {
		t.Fatalf("the most recently asked selector was evicted")
	}
	if _, ok := big.byKey[demandKey{s: "app=99"}]; !ok {
		t.Fatalf("the newest selector was evicted")
	}

	// Over the total, the namespace holding the most gives way.
	for i := range 4 {
		ask(fmt.Sprintf("ns%d", i), "z")
	}
	if n := tr.demand.len(""); n > 5 {
		t.Fatalf("%d entries, bound 5", n)
	}
	if tr.demand.len("small1") != 1 || tr.demand.len("small2") != 1 {
		t.Fatalf("small namespaces evicted before the largest")
	}
}

// An evicted selector stops making its pods targets.
// Was wrong: demand had no bound, so no selector left it before its TTL.
func TestEvictedSelectorIsNoLongerDemand(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	a, b := testPod("a", nil, port), testPod("b", nil, port)
	setter := &recSetter{}
	tr := New(Config{DemandTTL: time.Hour, Resync: time.Second, MaxSelectorsPerNamespace: 1},
		corelisters.NewPodLister(podIndex(t, a, b)), testScraper{setter, &recProber{}}, testStore{knownSet{"a": true, "b": true}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "a"}), nil)
	tr.Reconcile()
	if got := names(setter.last); got != "[a]" {
		t.Fatalf("targets %s", got)
	}
	tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "b"}), nil)
	tr.Reconcile()
	if got := names(setter.last); got != "[b]" {
		t.Fatalf("targets %s, want only b once a's selector is evicted", got)
	}
}

// A question without a selector, or without a namespace, registers no
// demand and scrapes nothing.
// Was wrong: it made every Running pod it could match a target.
func TestUnnarrowedQuestionCreatesNoDemand(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	db := testPod("postgres", nil, port)
	llm := testPod("llm", nil, port)
	setter, prober := &recSetter{}, &recProber{}
	tr := New(Config{DemandTTL: time.Hour, FirstScrapeTimeout: time.Second, Resync: time.Second},
		corelisters.NewPodLister(podIndex(t, db, llm)), testScraper{setter, prober}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Want(context.Background(), "ns", labels.Everything(), []*corev1.Pod{db, llm})
	tr.Want(context.Background(), "", labels.SelectorFromSet(labels.Set{"app": "llm"}), []*corev1.Pod{llm})
	tr.Reconcile()
	if len(prober.scraped) != 0 || len(setter.last) != 0 || tr.demand.len("") != 0 {
		t.Fatalf("scraped %v, targets %s, demand %d: want nothing", prober.scraped, names(setter.last), tr.demand.len(""))
	}
}

// A pod asked about by name stays a target, so asking again does not
// scrape it again; pods sharing its labels are not made targets.
// Was wrong: every question about an unlabelled pod scraped it anew.
func TestPodAskedByNameStaysScraped(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	bare := testPod("bare", nil, port)
	bare.Labels = nil
	sibling := testPod("sibling", nil, port)
	sibling.Labels = nil
	setter, prober := &recSetter{}, &recProber{}
	known := knownSet{}
	tr := New(Config{DemandTTL: time.Hour, FirstScrapeTimeout: time.Second, Resync: time.Second},
		corelisters.NewPodLister(podIndex(t, bare, sibling)), testScraper{setter, prober}, testStore{known, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	for range 3 {
		tr.WantPod(context.Background(), bare)
		known["bare"] = true // the scrape recorded an outcome
		tr.Reconcile()
		if got := names(setter.last); got != "[bare]" {
			t.Fatalf("targets %s, want the pod asked about", got)
		}
	}
	if fmt.Sprint(prober.scraped) != "[bare]" {
		t.Fatalf("scraped %v, want one first scrape", prober.scraped)
	}
}

// Two Running pods with one IP: only the newer is scraped, in Reconcile and
// in a first scrape, and the older is Shadowed.
// Was wrong: both were scraped at that IP, so one's page was taken for the other's.
func TestSameIPOnlyNewestScraped(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	old := testPod("old", map[string]string{AnnotationScrape: "true"}, port)
	old.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	young := testPod("young", map[string]string{AnnotationScrape: "true"}, port)
	young.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
	host := testPod("host", map[string]string{AnnotationScrape: "true"}, corev1.ContainerPort{Name: "http", ContainerPort: 9000})
	host.Spec.HostNetwork = true
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{old, young, host} {
		p.Status.PodIP = "10.0.0.7"
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	setter, prober := &recSetter{}, &recProber{}
	tr := New(Config{DemandTTL: time.Hour, FirstScrapeTimeout: time.Second, Resync: time.Second},
		corelisters.NewPodLister(idx), testScraper{setter, prober}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))

	tr.Want(context.Background(), "ns", labels.SelectorFromSet(labels.Set{"app": "old"}), []*corev1.Pod{old})
	if len(prober.scraped) != 0 {
		t.Fatalf("first scrape of %v: the older pod's IP serves the newer pod's page", prober.scraped)
	}
	tr.Reconcile()
	if got := names(setter.last); got != "[host young]" {
		t.Fatalf("targets %s, want the newer pod (and the host-network pod)", got)
	}
	if newer, ok := tr.Shadowed(types.NamespacedName{Namespace: "ns", Name: "old"}); !ok || newer.Name != "young" {
		t.Fatalf("Shadowed(old) = %v, %v", newer, ok)
	}
	if _, ok := tr.Shadowed(types.NamespacedName{Namespace: "ns", Name: "young"}); ok {
		t.Fatalf("the newest pod is shadowed")
	}
}

type nopSetter struct{}

func (nopSetter) SetTargets([]scrape.Target) {}

type nopForget struct{}

func (nopForget) Retain(time.Time, func(types.NamespacedName) bool) {}

// BenchmarkReconcile is one steady-state reconcile over 2,000 pods in 20
// namespaces with 10 or 1,000 selectors asked. Compare the ns/op of the two:
// the cost must not grow with the selectors.
func BenchmarkReconcile(b *testing.B) {
	for _, selectors := range []int{10, 1000} {
		b.Run(fmt.Sprintf("selectors=%d", selectors), func(b *testing.B) {
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for i := range 2000 {
				p := testPod(fmt.Sprintf("p%d", i), nil, corev1.ContainerPort{Name: "http", ContainerPort: 8000})
				p.Namespace = fmt.Sprintf("ns%d", i%20)
				p.UID = types.UID(p.Name)
				p.ResourceVersion = "1"
				p.Labels = map[string]string{"app": fmt.Sprintf("app%d", i%100)}
				p.Status.PodIP = fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
				if err := idx.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			tr := New(Config{DemandTTL: time.Hour, Resync: time.Second}, corelisters.NewPodLister(idx), testScraper{nopSetter{}, &recProber{}}, testStore{knownSet{}, nopForget{}},
				testclock.NewFakePassiveClock(time.Unix(1000, 0)))
			for i := range selectors {
				// Selectors that match nothing: every one must be tried on a re-match.
				tr.Want(context.Background(), fmt.Sprintf("ns%d", i%20), labels.SelectorFromSet(labels.Set{"app": "none", "i": fmt.Sprint(i)}), nil)
			}
			tr.Reconcile()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tr.Reconcile()
			}
		})
	}
}
