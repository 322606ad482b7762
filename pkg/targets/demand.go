package targets

import (
	"container/list"
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

// demandKey names one entry of a namespace's demand: a label selector asked
// about, or one pod asked about by name.
type demandKey struct {
	pod bool   // name is a pod name rather than a selector
	s   string // the selector's String(), or the pod's name
}

// want is one entry of demand.
type want struct {
	key      demandKey
	selector labels.Selector // nil for a pod entry
	lastAsk  time.Time
}

// nsDemand is the demand of one namespace: its entries in least recently
// asked order, and a generation that changes whenever the set of entries
// changes (not when an entry is merely asked again), so that the tracker
// can keep each pod's wanted result until its namespace's demand changes.
type nsDemand struct {
	byKey map[demandKey]*list.Element
	lru   *list.List // of *want; front is the most recently asked
	gen   uint64
}

// demandSet is the bounded demand of every namespace. It is not safe for
// concurrent use; the Tracker guards it with its mutex.
type demandSet struct {
	perNamespace int
	total        int
	n            int    // entries over all namespaces
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

// ask records that key was asked about in namespace at now. It reports
// whether the entry is new. Over the per-namespace bound the namespace's
// least recently asked entry goes; over the total bound, the least recently
// asked entry of the namespace holding the most entries goes, so that one
// busy namespace cannot evict the demand of small ones.
func (d *demandSet) ask(namespace string, key demandKey, selector labels.Selector, now time.Time) bool {
	nd := d.ns[namespace]
	if nd == nil {
		nd = &nsDemand{byKey: make(map[demandKey]*list.Element), lru: list.New()}
		d.ns[namespace] = nd
	}
	if e, ok := nd.byKey[key]; ok {
		e.Value.(*want).lastAsk = now
		nd.lru.MoveToFront(e)
		return false
	}
	nd.byKey[key] = nd.lru.PushFront(&want{key: key, selector: selector, lastAsk: now})
	d.n++
	d.bump(nd)
	if nd.lru.Len() > d.perNamespace {
		d.evictOldest(namespace, nd)
	}
	for d.n > d.total {
		d.evictOldest(d.largest())
	}
	return true
}

// largest returns the namespace holding the most entries; ties go to the
// smaller name, so that eviction is deterministic.
func (d *demandSet) largest() (string, *nsDemand) {
	var name string
	var most *nsDemand
	for ns, nd := range d.ns {
		if most == nil || nd.lru.Len() > most.lru.Len() || (nd.lru.Len() == most.lru.Len() && ns < name) {
			name, most = ns, nd
		}
	}
	return name, most
}

func (d *demandSet) evictOldest(namespace string, nd *nsDemand) {
	d.remove(namespace, nd, nd.lru.Back())
}

func (d *demandSet) remove(namespace string, nd *nsDemand, e *list.Element) {
	w := nd.lru.Remove(e).(*want)
	delete(nd.byKey, w.key)
	d.n--
	d.bump(nd)
	if nd.lru.Len() == 0 {
		delete(d.ns, namespace)
	}
}

// expire drops the entries last asked before cutoff and reports whether it
// dropped any. Its cost is the number of namespaces plus the number of
// entries dropped.
func (d *demandSet) expire(cutoff time.Time) bool {
	before := d.n
	for ns, nd := range d.ns {
		for e := nd.lru.Back(); e != nil && e.Value.(*want).lastAsk.Before(cutoff); e = nd.lru.Back() {
			d.remove(ns, nd, e)
			if d.ns[ns] == nil {
				break
			}
		}
	}
	return d.n != before
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
	if _, ok := nd.byKey[demandKey{pod: true, s: p.Name}]; ok {
		return true
	}
	set := labels.Set(p.Labels)
	for e := nd.lru.Front(); e != nil; e = e.Next() {
		if w := e.Value.(*want); w.selector != nil && w.selector.Matches(set) {
			return true
		}
	}
	return false
}

// len returns the number of entries in namespace ("" for all namespaces).
func (d *demandSet) len(namespace string) int {
	if namespace == "" {
		return d.n
	}
	if nd := d.ns[namespace]; nd != nil {
		return nd.lru.Len()
	}
	return 0
}
