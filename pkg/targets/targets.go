// Package targets decides which pods are scraped. A pod is a target while it
// is Running with an IP and either opts in with the
// inference-metrics-adapter/scrape annotation or matches a label selector the
// custom metrics API was asked about within the demand TTL. Pods come from an
// informer cache, so pods that appear are picked up and pods that go away are
// dropped without polling the API server.
package targets

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/scrape"
)

// Setter receives the full desired set of targets after every change.
type Setter interface {
	SetTargets(ts []scrape.Target)
}

// Prober scrapes targets once, now, within the context's deadline.
type Prober interface {
	ScrapeNow(ctx context.Context, ts []scrape.Target)
}

// Known tells whether a pod has a recorded scrape outcome.
type Known interface {
	Scraped(pod types.NamespacedName) bool
}

// Forgetter drops stored values of pods that are no longer targets.
type Forgetter interface {
	Retain(keep func(types.NamespacedName) bool)
}

// Config holds the tracker's settings.
type Config struct {
	// DemandTTL is how long a selector stays wanted after it was last asked about.
	DemandTTL time.Duration
	// FirstScrapeTimeout bounds the synchronous scrape of pods asked about
	// before they were ever scraped.
	FirstScrapeTimeout time.Duration
	// Resync is the period of the reconcile loop when no pod event arrives;
	// it expires demand.
	Resync time.Duration
	// AgentSelector picks the gpu-agent pods, which are always scraped as
	// GPU agents; nil disables GPU metrics.
	AgentSelector labels.Selector
	// AgentNamespace limits AgentSelector to one namespace; "" is any.
	AgentNamespace string
	// Servers resolves the server annotation, custom servers included; nil
	// knows the built-in servers only.
	Servers *parse.Servers
}

type demandKey struct {
	namespace string
	selector  string
}

type demand struct {
	selector labels.Selector
	lastAsk  time.Time
}

// Tracker computes the target set from the pod cache and demand.
type Tracker struct {
	cfg    Config
	pods   corelisters.PodLister
	setter Setter
	prober Prober
	known  Known
	forget Forgetter
	clock  clock.PassiveClock

	mu     sync.Mutex
	demand map[demandKey]*demand
	poke   chan struct{}
}

// New returns a Tracker. Call Run to start reconciling.
func New(cfg Config, pods corelisters.PodLister, setter Setter, prober Prober, known Known, forget Forgetter, clk clock.PassiveClock) *Tracker {
	return &Tracker{
		cfg: cfg, pods: pods, setter: setter, prober: prober, known: known, forget: forget, clock: clk,
		demand: make(map[demandKey]*demand),
		poke:   make(chan struct{}, 1),
	}
}

// Poke asks for a reconcile soon; it never blocks. Wire it to pod informer events.
func (t *Tracker) Poke() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// Run reconciles on every poke and every Resync until ctx is done.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Resync)
	defer tick.Stop()
	for {
		t.Reconcile()
		select {
		case <-ctx.Done():
			return
		case <-t.poke:
		case <-tick.C:
		}
	}
}

// Want records that pods matching selector in namespace are wanted, and
// scrapes at once (within FirstScrapeTimeout) those of pods that were
// never scraped, so that the first answer about a selector is not empty.
//
// A selector that selects nothing (labels.Nothing()) registers no demand: the
// pods are scraped once now and kept only while other demand wants them.
func (t *Tracker) Want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod) {
	existed := true
	if _, selectable := selector.Requirements(); selectable {
		key := demandKey{namespace, selector.String()}
		t.mu.Lock()
		var d *demand
		d, existed = t.demand[key]
		if !existed {
			d = &demand{selector: selector}
			t.demand[key] = d
		}
		d.lastAsk = t.clock.Now()
		t.mu.Unlock()
	}

	var fresh []scrape.Target
	for _, p := range pods {
		if !IsRunning(p) || t.known.Scraped(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}) {
			continue
		}
		if tg, err := targetFor(p, t.cfg.Servers); err == nil {
			fresh = append(fresh, tg)
		}
	}
	if !existed || len(fresh) > 0 {
		t.Poke()
	}
	if len(fresh) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.FirstScrapeTimeout)
	defer cancel()
	t.prober.ScrapeNow(ctx, fresh)
}

// Reconcile computes the target set from the pod cache and hands it to the Setter.
func (t *Tracker) Reconcile() {
	now := t.clock.Now()
	t.mu.Lock()
	active := make(map[string][]labels.Selector)
	for k, d := range t.demand {
		if now.Sub(d.lastAsk) > t.cfg.DemandTTL {
			delete(t.demand, k)
			continue
		}
		active[k.namespace] = append(active[k.namespace], d.selector)
	}
	t.mu.Unlock()

	pods, err := t.pods.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing pods from the informer cache")
		return
	}
	ts := make([]scrape.Target, 0, len(pods))
	keep := make(map[types.NamespacedName]struct{}, len(pods))
	for _, p := range pods {
		if !IsRunning(p) {
			continue
		}
		if t.isAgent(p) {
			url, err := Endpoint(p)
			if err != nil {
				klog.V(2).InfoS("gpu-agent pod cannot be scraped", "pod", klog.KObj(p), "err", err)
				continue
			}
			ts = append(ts, scrape.Target{Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, URL: url, Kind: scrape.GPUAgent})
			continue
		}
		if !wanted(p, active[p.Namespace]) {
			continue
		}
		tg, err := targetFor(p, t.cfg.Servers)
		if err != nil {
			klog.V(2).InfoS("Pod is wanted but cannot be scraped", "pod", klog.KObj(p), "err", err)
			continue
		}
		ts = append(ts, tg)
		keep[tg.Pod] = struct{}{}
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Pod.Namespace != ts[j].Pod.Namespace {
			return ts[i].Pod.Namespace < ts[j].Pod.Namespace
		}
		return ts[i].Pod.Name < ts[j].Pod.Name
	})
	t.setter.SetTargets(ts)
	t.forget.Retain(func(pod types.NamespacedName) bool {
		_, ok := keep[pod]
		return ok
	})
}

func (t *Tracker) isAgent(p *corev1.Pod) bool {
	if t.cfg.AgentSelector == nil || t.cfg.AgentSelector.Empty() {
		return false
	}
	if t.cfg.AgentNamespace != "" && p.Namespace != t.cfg.AgentNamespace {
		return false
	}
	return t.cfg.AgentSelector.Matches(labels.Set(p.Labels))
}

func wanted(p *corev1.Pod, selectors []labels.Selector) bool {
	if p.Annotations[AnnotationScrape] == "true" {
		return true
	}
	set := labels.Set(p.Labels)
	for _, s := range selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

func targetFor(p *corev1.Pod, servers *parse.Servers) (scrape.Target, error) {
	url, err := Endpoint(p)
	if err != nil {
		return scrape.Target{}, err
	}
	server, err := ForcedServer(p, servers)
	if err != nil {
		return scrape.Target{}, err
	}
	return scrape.Target{Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, URL: url, Server: server}, nil
}
