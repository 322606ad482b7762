// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"container/list"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Default demand bounds, as the flags --max-selectors-per-namespace and
// --max-selectors default them.
const (
	DefaultMaxSelectorsPerNamespace = 64
	DefaultMaxSelectors             = 2048
)

// SelectsWholeNamespace reports whether sel picks pods only by what they
// lack: labels.Everything(), or requirements that are all negations (!x,
// x!=y, x notin (...)), such as "!zzz", which every pod without that label
// matches. Such a selector ranges over a whole namespace, so a question
// that must pick pods (an external metric's, a KEDA trigger's) refuses it,
// as it refuses an empty one. labels.Nothing() selects nothing.
func SelectsWholeNamespace(sel labels.Selector) bool {
	if sel == nil || sel.Empty() {
		return true
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.NotEquals, selection.NotIn, selection.DoesNotExist:
		default:
			return false
		}
	}
	return true
}

// Pool is a bounded pool of demand. Each pool has the bounds of its own
// (MaxSelectorsPerNamespace, MaxSelectors), so that the questions asked
// through one front cannot evict those asked through another: a KEDA
// trigger's selectors never push an HPA's out.
type Pool uint8

const (
	// PoolAPI holds the questions of the custom and external metrics APIs,
	// which HPAs ask; it is a context's pool unless WithPool says otherwise.
	PoolAPI Pool = iota
	// PoolKEDA holds the questions of the KEDA scaler's port.
	PoolKEDA
	numPools
)

type poolKey struct{}

// WithPool returns a context whose questions (Tracker.Want, WantPod) are
// kept as demand in pool.
func WithPool(ctx context.Context, pool Pool) context.Context {
	return context.WithValue(ctx, poolKey{}, pool)
}

// poolOf is ctx's pool: PoolAPI unless WithPool set another.
func poolOf(ctx context.Context) Pool {
	if p, ok := ctx.Value(poolKey{}).(Pool); ok && p < numPools {
		return p
	}
	return PoolAPI
}

// demandKey names one entry of a namespace's demand: a label selector asked
// about, or one pod asked about by name, in a pool.
type demandKey struct {
	pool Pool
	pod  bool   // name is a pod name rather than a selector
	s    string // the selector's String(), or the pod's name
}

// want is one entry of demand.
type want struct {
	key      demandKey
	selector labels.Selector // nil for a pod entry
	lastAsk  time.Time
}

// nsDemand is the demand of one namespace: its entries of each pool in least
// recently asked order, and a generation that changes whenever the set of
// entries changes (not when an entry is merely asked again), so that the
// tracker can keep each pod's wanted result until its namespace's demand
// changes.
type nsDemand struct {
	byKey map[demandKey]*list.Element
	lru   [numPools]*list.List // of *want; front is the most recently asked
	gen   uint64
}

func (nd *nsDemand) len() int {
	n := 0
	for _, l := range nd.lru {
		n += l.Len()
	}
	return n
}

// demandSet is the bounded demand of every namespace, in pools bounded
// alike and apart. It is not safe for concurrent use; the Tracker guards it
// with its mutex.
type demandSet struct {
	perNamespace int // entries of one pool in one namespace
	total        int // entries of one pool over all namespaces
	n            [numPools]int
	gen          uint64 // last generation handed out; generations are never reused
	ns           map[string]*nsDemand
}

func newDemandSet(perNamespace, total int) *demandSet {
	if perNamespace <= 0 {
		perNamespace = DefaultMaxSelectorsPerNamespace
	}
	if total <= 0 {
		total = DefaultMaxSelectors
	}
	return &demandSet{perNamespace: perNamespace, total: total, ns: make(map[string]*nsDemand)}
}

func (d *demandSet) bump(nd *nsDemand) {
	d.gen++
	nd.gen = d.gen
}

// ask records that key was asked about in namespace at now, in key's pool.
// It reports whether the entry is new. Over the per-namespace bound the
// namespace's least recently asked entry of that pool goes; over the total
// bound, the least recently asked entry of that pool in the namespace
// holding the most of the pool's entries goes, so that one busy namespace
// cannot evict the demand of small ones, and one pool never evicts
// another's.
func (d *demandSet) ask(namespace string, key demandKey, selector labels.Selector, now time.Time) bool {
	nd := d.ns[namespace]
	if nd == nil {
		nd = &nsDemand{byKey: make(map[demandKey]*list.Element)}
		for i := range nd.lru {
			nd.lru[i] = list.New()
		}
		d.ns[namespace] = nd
	}
	pool := key.pool
	if e, ok := nd.byKey[key]; ok {
		e.Value.(*want).lastAsk = now
		nd.lru[pool].MoveToFront(e)
		return false
	}
	nd.byKey[key] = nd.lru[pool].PushFront(&want{key: key, selector: selector, lastAsk: now})
	d.n[pool]++
	d.bump(nd)
	if nd.lru[pool].Len() > d.perNamespace {
		d.evictOldest(namespace, nd, pool)
	}
	for d.n[pool] > d.total {
		ns, most := d.largest(pool)
		d.evictOldest(ns, most, pool)
	}
	return true
}

// largest returns the namespace holding the most entries of pool; ties go
// to the smaller name, so that eviction is deterministic.
func (d *demandSet) largest(pool Pool) (string, *nsDemand) {
	var name string
	var most *nsDemand
	for ns, nd := range d.ns {
		if most == nil || nd.lru[pool].Len() > most.lru[pool].Len() || (nd.lru[pool].Len() == most.lru[pool].Len() && ns < name) {
			name, most = ns, nd
		}
	}
	return name, most
}

func (d *demandSet) evictOldest(namespace string, nd *nsDemand, pool Pool) {
	d.remove(namespace, nd, nd.lru[pool].Back())
}

func (d *demandSet) remove(namespace string, nd *nsDemand, e *list.Element) {
	w := e.Value.(*want)
	nd.lru[w.key.pool].Remove(e)
	delete(nd.byKey, w.key)
	d.n[w.key.pool]--
	d.bump(nd)
	if nd.len() == 0 {
		delete(d.ns, namespace)
	}
}

// expire drops the entries last asked before cutoff and reports whether it
// dropped any. Its cost is the number of namespaces plus the number of
// entries dropped.
func (d *demandSet) expire(cutoff time.Time) bool {
	before := d.len("")
	for ns, nd := range d.ns {
		for _, l := range nd.lru {
			for e := l.Back(); e != nil && e.Value.(*want).lastAsk.Before(cutoff); e = l.Back() {
				d.remove(ns, nd, e)
			}
		}
	}
	return d.len("") != before
}

// generation returns the generation of namespace's demand; 0 when it has none.
func (d *demandSet) generation(namespace string) uint64 {
	if nd := d.ns[namespace]; nd != nil {
		return nd.gen
	}
	return 0
}

// wants reports whether p is wanted by its namespace's demand: asked about
// by name, or matched by a selector asked about.
func (d *demandSet) wants(p *corev1.Pod) bool {
	nd := d.ns[p.Namespace]
	if nd == nil {
		return false
	}
	for pool := range numPools {
		if _, ok := nd.byKey[demandKey{pool: pool, pod: true, s: p.Name}]; ok {
			return true
		}
	}
	set := labels.Set(p.Labels)
	for _, l := range nd.lru {
		for e := l.Front(); e != nil; e = e.Next() {
			if w := e.Value.(*want); w.selector != nil && w.selector.Matches(set) {
				return true
			}
		}
	}
	return false
}

// len returns the number of entries of every pool in namespace ("" for all
// namespaces).
func (d *demandSet) len(namespace string) int {
	if namespace == "" {
		n := 0
		for _, c := range d.n {
			n += c
		}
		return n
	}
	if nd := d.ns[namespace]; nd != nil {
		return nd.len()
	}
	return 0
}
