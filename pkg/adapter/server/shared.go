// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a sharedParts table.
const (
	// maxShared is the most entries one table holds; a table that reaches
	// it starts over.
	maxShared = 4096
	// maxSharedKey is the longest key shared; a larger part is kept as is.
	maxSharedKey = 1024
)

// sharedParts hands out one copy of each small part that many cached pods
// hold alike: the labels, annotations and owner references of a
// ReplicaSet's pods, their containers' ports, their Ready condition. 10,000
// pods of a few Deployments then keep a few copies instead of 10,000.
// Objects in an informer's cache are read-only (client-go's contract; the
// adapter never writes to them), so sharing parts between them is safe.
//
// Its memory is bounded whatever pods tenants create: a part whose key
// would be longer than maxSharedKey is not shared, and a table that reaches
// maxShared entries starts over (the parts already handed out stay with
// their pods).
type sharedParts struct {
	mu          sync.Mutex
	labels      map[string]map[string]string
	annotations map[string]map[string]string
	owners      map[string][]metav1.OwnerReference
	containers  map[string][]corev1.Container
	ready       map[readyKey][]corev1.PodCondition
}

// readyKey is what the slim Ready condition keeps: its status and when it
// last changed (whole seconds, as the API serializes it), from which the
// demand forecast reads how long a replica took to start.
type readyKey struct {
	status corev1.ConditionStatus
	at     int64
}

func newSharedParts() *sharedParts {
	s := &sharedParts{
		labels:      map[string]map[string]string{},
		annotations: map[string]map[string]string{},
		owners:      map[string][]metav1.OwnerReference{},
		containers:  map[string][]corev1.Container{},
		ready:       map[readyKey][]corev1.PodCondition{},
	}
	return s
}

// share returns the table's value for key, or keeps v under it.
func share[V any](s *sharedParts, table map[string]V, key string, v V) V {
	if len(key) > maxSharedKey {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if kept, ok := table[key]; ok {
		return kept
	}
	if len(table) >= maxShared {
		clear(table)
	}
	table[key] = v
	return v
}

// stringMap returns a map equal to m from table, or m; nil for empty.
func (s *sharedParts) stringMap(table map[string]map[string]string, m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
		if n > maxSharedKey {
			return m
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n + 8*len(keys))
	for _, k := range keys {
		// Annotation values may hold any byte, NUL included: each string
		// is length-prefixed so that no other map has the same key.
		writeField(&b, k)
		writeField(&b, m[k])
	}
	return share(s, table, b.String(), m)
}

// writeField writes s to b as its length, a colon and s itself: a
// concatenation of such fields splits only one way, whatever bytes the
// strings hold, so that two different parts never get the same key.
func writeField(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// ownerRefs returns owner references equal to refs, shared, or refs.
func (s *sharedParts) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	var b strings.Builder
	for _, r := range refs {
		// Only the fields' sizes are checked by the API server, so each is
		// length-prefixed (writeField).
		for _, f := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID), optBool(r.Controller), optBool(r.BlockOwnerDeletion)} {
			writeField(&b, f)
		}
		if b.Len() > maxSharedKey {
			return refs
		}
	}
	return share(s, s.owners, b.String(), refs)
}

func optBool(p *bool) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatBool(*p)
}

// portContainers returns the containers of p that declare ports, each
// with only its name and its ports' names and numbers, shared.
func (s *sharedParts) portContainers(p *corev1.Pod) []corev1.Container {
	var b strings.Builder
	n := 0
	for _, c := range p.Spec.Containers {
		if len(c.Ports) == 0 {
			continue
		}
		n++
		b.WriteString(c.Name)
		b.WriteByte(0)
		for _, cp := range c.Ports {
			b.WriteString(cp.Name)
			b.WriteByte(0)
			b.WriteString(strconv.Itoa(int(cp.ContainerPort)))
			b.WriteByte(0)
		}
		b.WriteByte(1) // ends the container's ports
	}
	if n == 0 {
		return nil
	}
	out := make([]corev1.Container, 0, n)
	for _, c := range p.Spec.Containers {
		if len(c.Ports) == 0 {
			continue
		}
		ports := make([]corev1.ContainerPort, len(c.Ports))
		for i, cp := range c.Ports {
			ports[i] = corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort}
		}
		out = append(out, corev1.Container{Name: c.Name, Ports: ports})
	}
	return share(s, s.containers, b.String(), out)
}

// readyCondition returns p's Ready condition alone, with its status and
// last transition time, shared, or nil. Pods of one rollout that turned
// Ready in the same second share one copy; the table is bounded as share's.
func (s *sharedParts) readyCondition(p *corev1.Pod) []corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		key := readyKey{status: c.Status}
		if !c.LastTransitionTime.IsZero() {
			key.at = c.LastTransitionTime.Unix()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if kept, ok := s.ready[key]; ok {
			return kept
		}
		if len(s.ready) >= maxShared {
			clear(s.ready)
		}
		kept := []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		s.ready[key] = kept
		return kept
	}
	return nil
}
