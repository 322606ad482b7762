// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// LeaderWorkerSets (leaderworkerset.x-k8s.io) run a model over a group of
// pods: a leader and its workers. The HPA scales one through its scale
// subresource, so a replica is a group, and a group's signals come from
// the one pod of it that serves the API: the leader (worker index 0) unless
// the LeaderWorkerSet's annotation AnnotationServingWorkerIndex names
// another worker index. The pods are found by the labels the LWS
// controller gives them; the LeaderWorkerSet object itself is read only for
// its name, labels and that annotation (a metadata-only informer, so the
// adapter needs no LWS API types, and nothing when the CRD is absent).

// The labels the LWS controller puts on every pod of a group.
const (
	LWSNameLabel        = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupIndexLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// AnnotationServingWorkerIndex, on a LeaderWorkerSet, is the worker index of
// the pod of each group that serves the API and is scraped; without it the
// leader (worker index 0) is.
const AnnotationServingWorkerIndex = "inference-metrics-adapter/serving-worker-index"

// LeaderWorkerSetGroup is the API group of LeaderWorkerSets; LeaderWorkerSetVersion its version.
const (
	LeaderWorkerSetGroup   = "leaderworkerset.x-k8s.io"
	LeaderWorkerSetVersion = "v1"
)

var leaderWorkerSetsGR = schema.GroupResource{Group: LeaderWorkerSetGroup, Resource: "leaderworkersets"}

// LeaderWorkerSet is what the adapter reads of a LeaderWorkerSet object.
type LeaderWorkerSet struct {
	Namespace, Name string
	Labels          map[string]string
	// ServingWorkerIndex is the value of AnnotationServingWorkerIndex, ""
	// when unset.
	ServingWorkerIndex string
}

// LeaderWorkerSetLister reads LeaderWorkerSets from a cache.
type LeaderWorkerSetLister interface {
	Get(namespace, name string) (*LeaderWorkerSet, error)
	List(namespace string, selector labels.Selector) ([]*LeaderWorkerSet, error)
}

// errLWSNotWatched is why a LeaderWorkerSet question has no answer when the
// adapter runs without --leader-worker-sets (no lister).
var errLWSNotWatched = errors.New("leaderworkersets.leaderworkerset.x-k8s.io are not watched by this adapter: it runs without --leader-worker-sets (the chart's leaderWorkerSet.enabled)")

// LeaderWorkerSetsNotWatchedError is what a LeaderWorkerSetLister returns
// while it reads no LeaderWorkerSets yet (their CRD is not served, or the
// adapter may not list and watch them): the provider answers the question
// 404 with its Reason.
type LeaderWorkerSetsNotWatchedError struct{ Reason string }

func (e *LeaderWorkerSetsNotWatchedError) Error() string {
	return "leaderworkersets.leaderworkerset.x-k8s.io are not watched yet: " + e.Reason
}

// Is makes a LeaderWorkerSetsNotWatchedError an errLWSNotWatched, so that
// every path that answers that with a 404 answers this too.
func (e *LeaderWorkerSetsNotWatchedError) Is(target error) bool { return target == errLWSNotWatched }

// lwsNotWatched reports whether err says that no LeaderWorkerSets are
// watched (yet): a 404 with its text, not an internal error.
func lwsNotWatched(err error) bool { return errors.Is(err, errLWSNotWatched) }

// servingIndex is the worker index of an LWS's serving pods.
func servingIndex(l *LeaderWorkerSet) (string, error) {
	if l.ServingWorkerIndex == "" {
		return "0", nil
	}
	n, err := strconv.Atoi(l.ServingWorkerIndex)
	if err != nil || n < 0 {
		return "", fmt.Errorf("leaderworkerset %s/%s: annotation %s=%q is not a worker index (0 for the leader, 1 and up for workers)", l.Namespace, l.Name, AnnotationServingWorkerIndex, l.ServingWorkerIndex)
	}
	return strconv.Itoa(n), nil
}

// lwsSelectors are an LWS's pod selectors: all its pods, and its serving
// pods (one a group).
func lwsSelectors(l *LeaderWorkerSet) (all, serving labels.Selector, err error) {
	idx, err := servingIndex(l)
	if err != nil {
		return nil, nil, err
	}
	name, err := labels.NewRequirement(LWSNameLabel, selection.Equals, []string{l.Name})
	if err != nil {
		return nil, nil, fmt.Errorf("leaderworkerset %s/%s: its name is not a label value: %w", l.Namespace, l.Name, err)
	}
	worker, err := labels.NewRequirement(LWSWorkerIndexLabel, selection.Equals, []string{idx})
	if err != nil {
		return nil, nil, err
	}
	all = labels.NewSelector().Add(*name)
	return all, all.Add(*worker), nil
}

// lwsServingSelector is the selector of an LWS's serving pods: what its
// object metrics read.
func (p *Provider) lwsServingSelector(name types.NamespacedName) (labels.Selector, error) {
	if p.list.LeaderWorkerSets == nil {
		return nil, errLWSNotWatched
	}
	l, err := p.list.LeaderWorkerSets.Get(name.Namespace, name.Name)
	if lwsNotWatched(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("leaderworkerset %s/%s: %w", name.Namespace, name.Name, err)
	}
	_, serving, err := lwsSelectors(l)
	return serving, err
}

// lwsGroupsWithoutServer counts the groups of an LWS that have live pods
// (not terminating, not finished) but no live serving pod: a group whose
// leader is gone, or whose workers were created first. Such a group is a
// replica that is starting (or being lost): it counts once, as starting,
// and has nothing to read. servingSel picks the serving pods (lwsSelectors);
// pods without a group index are not a group's and are left out.
func (p *Provider) lwsGroupsWithoutServer(namespace string, servingSel labels.Selector) (int, error) {
	var name string
	reqs, _ := servingSel.Requirements()
	for _, r := range reqs {
		if r.Key() == LWSNameLabel {
			name, _ = r.Values().PopAny()
		}
	}
	req, err := labels.NewRequirement(LWSNameLabel, selection.Equals, []string{name})
	if err != nil {
		return 0, err
	}
	pods, err := p.list.Pods.Pods(namespace).List(labels.NewSelector().Add(*req))
	if err != nil {
		return 0, fmt.Errorf("listing pods from cache: %w", err)
	}
	groups := map[string]bool{} // group index -> has a live serving pod
	for _, pod := range pods {
		if !live(pod) {
			continue
		}
		g, ok := pod.Labels[LWSGroupIndexLabel]
		if !ok {
			continue
		}
		if _, shadowed := p.shadowed(pod); shadowed {
			continue
		}
		groups[g] = groups[g] || servingSel.Matches(labels.Set(pod.Labels))
	}
	n := 0
	for _, served := range groups {
		if !served {
			n++
		}
	}
	return n, nil
}

// live reports whether pod counts as a replica: not terminating, not finished.
func live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// lwsNames lists the LWSs matching selector in namespace.
func (p *Provider) lwsNames(namespace string, selector labels.Selector) ([]string, error) {
	if p.list.LeaderWorkerSets == nil {
		return nil, errLWSNotWatched
	}
	ls, err := p.list.LeaderWorkerSets.List(namespace, selector)
	if lwsNotWatched(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("listing leaderworkersets from cache: %w", err)
	}
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		names = append(names, l.Name)
	}
	return names, nil
}
