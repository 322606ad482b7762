package scrape

import (
	"context"
	"sync"
)

// namespaceShare caps how many loop workers the targets of one namespace
// hold at once. A loop takes a slot of its namespace before it takes a
// worker, so loops waiting for their namespace hold no worker, and a
// namespace full of hanging pages leaves the other workers to everyone else.
type namespaceShare struct {
	limit int
	// free holds *nsSlots of namespaces that had no loop holding or
	// waiting, for reuse: a namespace whose scrapes never overlap would
	// otherwise make its slots anew for every scrape.
	free sync.Pool

	mu    sync.Mutex
	slots map[string]*nsSlots // only namespaces with loops holding or waiting
}

type nsSlots struct {
	sem   chan struct{}
	users int // loops holding or waiting for a slot
}

func newNamespaceShare(limit int) *namespaceShare {
	s := &namespaceShare{limit: limit, slots: map[string]*nsSlots{}}
	s.free.New = func() any { return &nsSlots{sem: make(chan struct{}, limit)} }
	return s
}

// acquire waits for a slot of namespace ns, or for ctx to end (then ok is
// false). release(ns, n) must be called once when the scrape is over.
func (s *namespaceShare) acquire(ctx context.Context, ns string) (n *nsSlots, ok bool) {
	s.mu.Lock()
	n = s.slots[ns]
	if n == nil {
		n = s.free.Get().(*nsSlots)
		s.slots[ns] = n
	}
	n.users++
	s.mu.Unlock()
	select {
	case n.sem <- struct{}{}:
		return n, true
	case <-ctx.Done():
		s.leave(ns, n)
		return nil, false
	}
}

// release gives back the slot of ns taken with acquire.
func (s *namespaceShare) release(ns string, n *nsSlots) {
	<-n.sem
	s.leave(ns, n)
}

func (s *namespaceShare) leave(ns string, n *nsSlots) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.users--; n.users == 0 {
		delete(s.slots, ns)
		s.free.Put(n) // no one holds or waits: its semaphore is empty
	}
}
