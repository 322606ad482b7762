// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package targets decides which pods are scraped. A pod is a target while it
// is Running with an IP and either opts in with the
// inference-metrics-adapter/scrape annotation, or is a front door (the
// inference-metrics-adapter/front-door-for annotation), or matches a label selector
// the custom metrics API was asked about within the demand TTL, or was asked
// about by name within the demand TTL. Pods come from an informer cache, so
// pods that appear are picked up and pods that go away are dropped without
// polling the API server.
//
// Demand is bounded: per namespace (Config.MaxSelectorsPerNamespace) and in
// total (Config.MaxSelectors), evicting the least recently asked entry of the
// namespace (or, over the total, of the namespace holding the most). The
// metrics APIs' questions and the KEDA scaler port's are kept in two pools
// (Pool), each bounded so, so that neither evicts the other's. A
// question without a selector or without a namespace creates no demand.
// Reconcile keeps each pod's result until the pod or its namespace's demand
// changes, so its steady-state cost does not grow with the selectors asked.
//
// When two Running pods have the same IP (eviction, watch lag), only the
// newest is scraped there; the older is Shadowed.
//
// gpu-agents are trusted only as DaemonSet pods of the configured agent
// namespace (AgentTrust), and AgentGate accepts from an agent only the pods
// on its own node.
package targets

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
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

// Forgetter drops stored values of pods that are no longer targets, at a
// time after which no scrape of them starts (store.Store.Retain).
type Forgetter interface {
	Retain(at time.Time, keep func(types.NamespacedName) bool)
}

// Scraper is what the tracker needs of the scraper: the full target set to
// scrape in the background, and a scrape of some pods now (scrape.Manager).
type Scraper interface {
	Setter
	Prober
}

// Store is what the tracker needs of the store: whether a pod has a
// recorded outcome, and dropping the pods that are no longer targets
// (store.Store).
type Store interface {
	Known
	Forgetter
}

// Config holds the tracker's settings.
type Config struct {
	// DemandTTL is how long a selector stays wanted after it was last asked about.
	DemandTTL time.Duration
	// FirstScrapeTimeout bounds the synchronous scrape of pods asked about
	// before they were ever scraped; zero disables that first scrape.
	FirstScrapeTimeout time.Duration
	// Resync is how often the reconcile loop expires demand when no pod
	// event arrives. The target set is recomputed on a resync only when
	// something may have changed it: a pod event or a new demand entry
	// (Poke), demand that expired, or fullResync since the last time.
	Resync time.Duration
	// MaxSelectorsPerNamespace bounds the demand entries (selectors and pods
	// asked about by name) of one namespace; 0 means
	// DefaultMaxSelectorsPerNamespace.
	MaxSelectorsPerNamespace int
	// MaxSelectors bounds the demand entries over all namespaces; 0 means
	// DefaultMaxSelectors.
	MaxSelectors int
	// AgentSelector picks the gpu-agent pods, which are always scraped as
	// GPU agents; nil disables GPU metrics.
	AgentSelector labels.Selector
	// AgentNamespace is the gpu-agents' namespace; only DaemonSet pods of
	// this namespace are agents. Empty disables GPU metrics.
	AgentNamespace string
	// Servers resolves the server annotation, custom servers included; nil
	// knows the built-in servers only.
	Servers *parse.Servers
	// ServerScrape holds, by server name, how the pods that name that
	// server in their server annotation are scraped (scheme, auth) when
	// their own annotations do not say: --server-config's scheme and auth.
	ServerScrape map[string]ScrapeSettings
}

// MaxSelectorLen is the longest label selector (its String()) kept as
// demand. A question's selector is the reader's to choose and a URL may
// carry one of about 1 MiB; demand keeps each entry's selector. The
// provider refuses longer ones before they get here (provider.MaxSelectorLen
// is this bound); Want still keeps none of them, like labels.Nothing(), so
// that demand's memory is bounded whoever calls it. A Deployment's selector
// is far shorter.
const MaxSelectorLen = 4096

// AgentTrust returns the rule that decides which pods are gpu-agents.
func (c Config) AgentTrust() AgentTrust {
	return AgentTrust{Selector: c.AgentSelector, Namespace: c.AgentNamespace}
}

// classified is a pod's reconcile result, kept until the pod object or its
// namespace's demand changes.
type classified struct {
	uid    types.UID
	rv     string
	gen    uint64 // the namespace's demand generation it was computed for
	target scrape.Target
	ok     bool // the pod is a target
}

// Tracker computes the target set from the pod cache and demand.
type Tracker struct {
	cfg     Config
	trust   AgentTrust
	pods    corelisters.PodLister
	scraper Scraper
	store   Store
	clock   clock.PassiveClock

	mu       sync.Mutex
	demand   *demandSet
	shadowed map[types.NamespacedName]types.NamespacedName // older pod -> newer pod at the same IP
	poke     chan struct{}

	// dirty is set by Poke: a pod event or a demand change since the last
	// reconcile began.
	dirty atomic.Bool

	reconcileMu sync.Mutex
	results     map[types.NamespacedName]classified // guarded by reconcileMu
	lastFull    time.Time                           // the last reconcile that recomputed; guarded by reconcileMu
}

// fullResync bounds how long a resync may skip recomputing the target set
// when nothing is known to have changed: a safety net, not a correctness
// need, since every input of the target set (pods, demand) pokes or expires.
const fullResync = time.Minute

// New returns a Tracker. Call Run to start reconciling.
func New(cfg Config, pods corelisters.PodLister, scraper Scraper, store Store, clk clock.PassiveClock) *Tracker {
	return &Tracker{
		cfg: cfg, trust: cfg.AgentTrust(), pods: pods, scraper: scraper, store: store, clock: clk,
		demand: newDemandSet(cfg.MaxSelectorsPerNamespace, cfg.MaxSelectors),
		poke:   make(chan struct{}, 1),
	}
}

// Poke asks for a reconcile soon; it never blocks. Wire it to pod informer events.
func (t *Tracker) Poke() {
	t.dirty.Store(true)
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// Run reconciles at once, then on every poke, and on every Resync when
// something may have changed (see Config.Resync), until ctx is done. In a
// steady fleet a resync costs the demand's expiry check, not a pass over
// every pod: at 10,000 pods that pass, every second, was a few percent of a
// core and megabytes of garbage.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Resync)
	defer tick.Stop()
	t.Reconcile()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.poke:
			t.Reconcile()
		case <-tick.C:
			t.reconcile(false)
		}
	}
}

// Want records that pods matching selector in namespace are wanted, and
// scrapes at once (within FirstScrapeTimeout) those of pods that were
// never scraped, so that the first answer about a selector is not empty.
//
// Demand is bounded (Config.MaxSelectorsPerNamespace, Config.MaxSelectors)
// in each pool apart, the pool ctx names (WithPool; PoolAPI by default):
// past a bound the pool's least recently asked entry is dropped.
// A selector that selects nothing (labels.Nothing()), or one longer than
// MaxSelectorLen, registers no demand: the pods are scraped once now and
// kept only while other demand wants them.
// A selector that selects everything, or an empty namespace, registers no
// demand and scrapes nothing: such questions are answered from pods already
// scraped.
func (t *Tracker) Want(ctx context.Context, namespace string, selector labels.Selector, pods []*corev1.Pod) {
	if namespace == "" || selector == nil || selector.Empty() {
		return
	}
	added := false
	if _, selectable := selector.Requirements(); selectable {
		if key := selector.String(); len(key) <= MaxSelectorLen {
			t.mu.Lock()
			added = t.demand.ask(namespace, demandKey{pool: poolOf(ctx), s: key}, selector, t.clock.Now())
			t.mu.Unlock()
		} else {
			klog.V(2).InfoS("Label selector too long to keep as demand; answering from a first scrape only", "namespace", namespace, "length", len(key), "limit", MaxSelectorLen)
		}
	}
	t.firstScrape(ctx, pods, added)
}

// WantPod records that pod was asked about by name: it stays a target for
// DemandTTL after the last question, within its namespace's demand bound,
// without making pods that share its labels wanted. A pod never scraped is
// scraped at once, as by Want.
func (t *Tracker) WantPod(ctx context.Context, pod *corev1.Pod) {
	if pod == nil || pod.Namespace == "" {
		return
	}
	t.mu.Lock()
	added := t.demand.ask(pod.Namespace, demandKey{pool: poolOf(ctx), pod: true, s: pod.Name}, nil, t.clock.Now())
	t.mu.Unlock()
	t.firstScrape(ctx, []*corev1.Pod{pod}, added)
}

// Shadowed reports whether, at the last reconcile, a newer Running pod had
// the same IP as pod: pod's address then serves the newer pod's page, so
// pod is no target and has no value of its own. It returns the newer pod.
func (t *Tracker) Shadowed(pod types.NamespacedName) (types.NamespacedName, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	newer, ok := t.shadowed[pod]
	return newer, ok
}

// firstScrape scrapes the never-scraped pods among pods at once, leaving out
// pods whose IP a newer pod has taken.
func (t *Tracker) firstScrape(ctx context.Context, pods []*corev1.Pod, changed bool) {
	var fresh []*corev1.Pod
	for _, p := range pods {
		if IsRunning(p) && !t.store.Scraped(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}) {
			fresh = append(fresh, p)
		}
	}
	if changed || len(fresh) > 0 {
		t.Poke()
	}
	if len(fresh) == 0 || t.cfg.FirstScrapeTimeout <= 0 {
		return
	}
	all, err := t.pods.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing pods from the informer cache")
		return
	}
	shadowed := shadowedPods(all)
	var ts []scrape.Target
	for _, p := range fresh {
		if _, ok := shadowed[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; ok {
			continue
		}
		if tg, err := targetFor(p, t.cfg); err == nil {
			ts = append(ts, tg)
		}
	}
	if len(ts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.FirstScrapeTimeout)
	defer cancel()
	t.scraper.ScrapeNow(ctx, ts)
}

// Reconcile computes the target set from the pod cache and hands it to the
// Setter. A pod's result is recomputed only when the pod object or its
// namespace's demand changed, so in steady state its cost depends on the
// number of pods, not on the number of selectors asked about.
func (t *Tracker) Reconcile() {
	t.reconcile(true)
}

// reconcile expires demand and recomputes the target set: always when
// force, else only if Poke was called since the last reconcile, demand
// expired, or fullResync has passed since the last recomputation.
func (t *Tracker) reconcile(force bool) {
	t.reconcileMu.Lock()
	defer t.reconcileMu.Unlock()
	// Cleared before the pods are listed: an event during this reconcile
	// sets it again, and pokes, so that none is missed.
	dirty := t.dirty.Swap(false)
	now := t.clock.Now()
	t.mu.Lock()
	expired := t.demand.expire(now.Add(-t.cfg.DemandTTL))
	t.mu.Unlock()
	if !force && !dirty && !expired && now.Sub(t.lastFull) < fullResync {
		return
	}
	pods, err := t.pods.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing pods from the informer cache")
		t.dirty.Store(true) // the next resync tries again
		return
	}
	t.lastFull = now
	shadowed := shadowedPods(pods)

	results := make(map[types.NamespacedName]classified, len(t.results))
	replaced := map[types.NamespacedName]bool{} // same name, new UID (a StatefulSet pod recreated)
	t.mu.Lock()
	for _, p := range pods {
		if !IsRunning(p) {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		gen := t.demand.generation(p.Namespace)
		c, ok := t.results[key]
		if ok && c.uid != p.UID {
			replaced[key] = true
		}
		if !ok || c.uid != p.UID || c.rv != p.ResourceVersion || c.gen != gen {
			c = t.classify(p, gen)
		}
		results[key] = c
	}
	t.shadowed = shadowed
	t.mu.Unlock()
	t.results = results

	ts := make([]scrape.Target, 0, len(results))
	keep := make(map[types.NamespacedName]struct{}, len(results))
	for key, c := range results {
		if !c.ok {
			continue
		}
		if newer, ok := shadowed[key]; ok {
			klog.V(2).InfoS("Pod shares its IP with a newer pod; not scraping it", "pod", klog.KRef(key.Namespace, key.Name), "newer", klog.KRef(newer.Namespace, newer.Name))
			continue
		}
		ts = append(ts, c.target)
		if c.target.Kind == scrape.ModelServer {
			keep[key] = struct{}{}
		}
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Pod.Namespace != ts[j].Pod.Namespace {
			return ts[i].Pod.Namespace < ts[j].Pod.Namespace
		}
		return ts[i].Pod.Name < ts[j].Pod.Name
	})
	t.scraper.SetTargets(ts)
	// A replaced pod's values and counters are forgotten: the new pod's
	// rates start over rather than count from the old pod's counters. The
	// time is taken after SetTargets has stopped the removed pods' loops,
	// so that a scrape of such a pod still in flight, which started
	// earlier, is not recorded under its name when it ends (a StatefulSet's
	// new pod of the same name would be answered with the old one's page).
	t.store.Retain(t.clock.Now(), func(pod types.NamespacedName) bool {
		_, ok := keep[pod]
		return ok && !replaced[pod]
	})
}

// classify decides whether a Running pod is a target, and which. The caller
// holds t.mu.
func (t *Tracker) classify(p *corev1.Pod, gen uint64) classified {
	c := classified{uid: p.UID, rv: p.ResourceVersion, gen: gen}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if t.trust.Trusted(p) {
		url, err := Endpoint(p)
		if err != nil {
			klog.V(2).InfoS("gpu-agent pod cannot be scraped", "pod", klog.KObj(p), "err", err)
			return c
		}
		c.target, c.ok = scrape.Target{Pod: key, URL: url, Kind: scrape.GPUAgent}, true
		return c
	}
	if _, frontDoor := FrontDoorFor(p); !frontDoor && p.Annotations[AnnotationScrape] != "true" && !t.demand.wants(p) {
		return c
	}
	tg, err := targetFor(p, t.cfg)
	if err != nil {
		klog.V(2).InfoS("Pod is wanted but cannot be scraped", "pod", klog.KObj(p), "err", err)
		return c
	}
	c.target, c.ok = tg, true
	return c
}

// shadowedPods maps each Running pod whose IP a newer Running pod also has
// to that newer pod. Watch lag and evictions leave such pairs; the IP then
// serves the newer pod's page, so only the newest pod may be scraped there.
// Newest is the later CreationTimestamp, then the greater namespace/name.
// Host-network pods share their node's IP legitimately and are left out.
func shadowedPods(pods []*corev1.Pod) map[types.NamespacedName]types.NamespacedName {
	newest := make(map[string]*corev1.Pod)
	dup := false
	for _, p := range pods {
		if !IsRunning(p) || p.Spec.HostNetwork {
			continue
		}
		ip := p.Status.PodIP
		cur, ok := newest[ip]
		if !ok {
			newest[ip] = p
			continue
		}
		dup = true
		if newer(p, cur) {
			newest[ip] = p
		}
	}
	if !dup {
		return nil
	}
	out := make(map[types.NamespacedName]types.NamespacedName)
	for _, p := range pods {
		if !IsRunning(p) || p.Spec.HostNetwork {
			continue
		}
		if n := newest[p.Status.PodIP]; n != p {
			out[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = types.NamespacedName{Namespace: n.Namespace, Name: n.Name}
		}
	}
	return out
}

func newer(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace > b.Namespace
	}
	return a.Name > b.Name
}

// targetFor is the model-server target of p: its URL, with the scheme,
// TLS server name and credential its annotations ask for, else its
// server's in --server-config (cfg.ServerScrape).
func targetFor(p *corev1.Pod, cfg Config) (scrape.Target, error) {
	server, err := ForcedServer(p, cfg.Servers)
	if err != nil {
		return scrape.Target{}, err
	}
	var def ScrapeSettings
	name := p.Annotations[AnnotationServer]
	if name != "" {
		def = cfg.ServerScrape[name]
	}
	scheme, serverName, auth, err := scrapeSettings(p, def, name)
	if err != nil {
		return scrape.Target{}, err
	}
	url, err := endpointURL(p, scheme)
	if err != nil {
		return scrape.Target{}, err
	}
	return scrape.Target{
		Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, URL: url, Server: server,
		TLSServerName: serverName, Auth: auth, HostNetwork: p.Spec.HostNetwork,
	}, nil
}
