// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// askEvery is how often the checker asks the aggregated API; directEvery
// how often it asks each adapter replica directly.
const (
	askEvery    = 250 * time.Millisecond
	directEvery = time.Second
)

// staleSlack is how long past --max-age a broken page's last value may
// still be answered: one scrape interval, its timeout and scheduling.
const staleSlack = 3 * time.Second

// answer is one question through the aggregator, as the HPA asks it.
type answer struct {
	start   time.Time
	end     time.Time // when the answer arrived
	err     error
	values  map[string]float64 // pod name -> value answered
	healthy bool               // every stable pod, each with its own value
}

// violation is an answer that broke a rule.
type violation struct {
	at   time.Time
	kind string
	text string
}

// Kinds of violation.
const (
	vForeign   = "value for a pod the soak never made"
	vWrong     = "value that is not the pod's own"
	vInherited = "value of the pod that held the address before"
	vOccupant  = "value of the pod that took the address after"
	vZero      = "missing value reported as 0"
	vStale     = "broken page's value answered past max-age"
	vScaled    = "HPA scaled down"
	vRecovery  = "no correct answer within the bound after a fault"
	vCrash     = "adapter exited without being killed"
	vLogs      = "adapter log lines per minute over the bound"
	vLeak      = "memory or goroutines not flat"
)

// timeline is every answer and violation, in order.
type timeline struct {
	mu         sync.Mutex
	answers    []answer
	violations []violation
	// counts of answers: total, failed (errors), healthy
	total, failed, healthy int
	// counts of the replicas' own answers
	directTotal, directFailed int
}

// direct counts a replica's own answer (not on the timeline).
func (tl *timeline) direct(a answer) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.directTotal++
	if a.err != nil {
		tl.directFailed++
	}
}

func (tl *timeline) violate(at time.Time, kind, format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.violations = append(tl.violations, violation{at: at, kind: kind, text: fmt.Sprintf(format, args...)})
}

func (tl *timeline) add(a answer) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.total++
	if a.err != nil {
		tl.failed++
	}
	if a.healthy {
		tl.healthy++
	}
	// Keep the answers in order of start: concurrent questions may end
	// out of order.
	i := len(tl.answers)
	for i > 0 && tl.answers[i-1].start.After(a.start) {
		i--
	}
	tl.answers = slices.Insert(tl.answers, i, a)
}

// firstAfter returns the start of the first answer started at or after t
// for which ok holds.
func (tl *timeline) firstAfter(t time.Time, ok func(answer) bool) (time.Time, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	i := sort.Search(len(tl.answers), func(i int) bool { return !tl.answers[i].start.Before(t) })
	for _, a := range tl.answers[i:] {
		if ok(a) {
			return a.start, true
		}
	}
	return time.Time{}, false
}

// waitFor waits (at most limit) for an answer started at or after t for
// which ok holds and returns how long after t it started.
func (tl *timeline) waitFor(ctx context.Context, t time.Time, limit time.Duration, ok func(answer) bool) (time.Duration, bool) {
	var after time.Duration
	err := wait.PollUntilContextTimeout(ctx, askEvery, limit, true, func(context.Context) (bool, error) {
		at, found := tl.firstAfter(t, ok)
		after = at.Sub(t)
		return found, nil
	})
	if err != nil {
		return 0, false
	}
	return after, true
}

func isHealthy(a answer) bool { return a.healthy }

// questionPath is the question the HPA asks about the soak's pods, as a
// replica is asked directly.
func questionPath() string {
	return fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", namespace, metric)
}

// ask reads every soak pod's queue size through the aggregator, as the HPA
// controller does: with its typed client (each answer bounded by the
// client's 5 s timeout).
func (e *env) ask(ctx context.Context) (map[string]float64, error) {
	return e.metrics.PodValues(ctx, namespace, metric, labels.SelectorFromSet(labels.Set{soakLabel: "1"}))
}

// askReplica asks replica i the same question directly, as the aggregator
// does (front-proxy client certificate, the user in X-Remote-* headers).
// With one kube-apiserver the aggregator holds one connection, so only one
// replica would ever be asked; a cluster's several API servers spread the
// questions, and so does this.
func (e *env) askReplica(ctx context.Context, c *http.Client, i int) (map[string]float64, error) {
	u := e.adapters.ReplicaURL(i) + questionPath() + "?labelSelector=" + url.QueryEscape(soakLabel+"=1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Remote-User", framework.AdminUser)
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("replica %d: read: %w", i, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("replica %d: %s: %.200s", i, resp.Status, body)
	}
	return decodeAnswer(body)
}

func decodeAnswer(body []byte) (map[string]float64, error) {
	var list cmv1beta2.MetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	out := make(map[string]float64, len(list.Items))
	for _, it := range list.Items {
		out[it.DescribedObject.Name] = it.Value.AsApproximateFloat64()
	}
	return out, nil
}

// check asks through the aggregator every askEvery, and each replica
// directly every directEvery, until ctx ends, and judges every answer.
// Only the aggregator's answers go on the timeline (recovery is what the
// HPA sees); a replica's own answers are judged by the same rules.
func (e *env) check(ctx context.Context, reg *registry, tl *timeline) {
	direct, err := e.adapters.HTTPClient(e.cp.FrontProxyClient)
	if err != nil {
		tl.violate(time.Now(), vForeign, "checker: %v", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(directEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i := range e.adapters.Ports {
				start := time.Now()
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				values, err := e.askReplica(actx, direct, i)
				cancel()
				if ctx.Err() != nil {
					return
				}
				tl.direct(judge(reg, tl, answer{start: start, end: time.Now(), err: err, values: values}))
			}
		}
	})
	// Questions do not wait for each other (one that hangs while a
	// component is down must not hide the first correct answer after it),
	// up to maxInFlight at once.
	const maxInFlight = 16
	inFlight := make(chan struct{}, maxInFlight)
	t := time.NewTicker(askEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case inFlight <- struct{}{}:
		default:
			continue // maxInFlight questions hang: skip this tick
		}
		start := time.Now()
		wg.Go(func() {
			defer func() { <-inFlight }()
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			values, err := e.ask(actx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			tl.add(judge(reg, tl, answer{start: start, end: time.Now(), err: err, values: values}))
		})
	}
}

// judge checks one answer against what each pod serves, records the
// violations, and says whether it is healthy.
func judge(reg *registry, tl *timeline, a answer) answer {
	if a.err != nil {
		return a
	}
	for pod, got := range a.values {
		want, known := reg.value(pod)
		switch {
		case !known:
			tl.violate(a.start, vForeign, "pod %s answered %v", pod, got)
		case got == 0:
			tl.violate(a.start, vZero, "pod %s answered 0, serves %d", pod, want)
		case got != float64(want):
			if owner, earlier := reg.ownerOf(pod, int64(got)); owner != "" && earlier {
				tl.violate(a.start, vInherited, "pod %s answered %v: the value of %s, which held its address before; it serves %d", pod, got, owner, want)
			} else if owner != "" {
				tl.violate(a.start, vOccupant, "pod %s answered %v: the value of %s, which took its address after it; it serves %d", pod, got, owner, want)
			} else {
				tl.violate(a.start, vWrong, "pod %s answered %v, serves %d", pod, got, want)
			}
		}
		// The adapter read its store somewhere between the question's start
		// and the answer's arrival. Only when the page stayed broken all
		// that time can the value be nothing but the last one scraped before
		// it broke; an answer that arrived after the page was mended may
		// hold a fresh scrape of the mended page, which serves the same value.
		if since, broken := reg.brokenThrough(pod, a.start, a.end); broken && a.start.Sub(since) > maxAge+staleSlack {
			tl.violate(a.start, vStale, "pod %s answered %v %s after its page broke (max-age %s; the answer took %s)", pod, got, a.start.Sub(since).Round(time.Millisecond), maxAge, a.end.Sub(a.start).Round(time.Millisecond))
		}
	}
	a.healthy = len(reg.stable) > 0
	for _, pod := range reg.stable {
		want, _ := reg.value(pod)
		if got, ok := a.values[pod]; !ok || got != float64(want) {
			a.healthy = false
		}
	}
	return a
}

// hpaWatch records, every second until ctx ends, the HPA Deployment's
// replicas and the HPA's desired replicas; any drop below hpaReplicas is a
// violation. It returns the least and most replicas seen.
func (e *env) hpaWatch(ctx context.Context, tl *timeline) (lo, hi int32) {
	lo, hi = hpaReplicas, hpaReplicas
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return lo, hi
		case <-t.C:
		}
		now := time.Now()
		if d, err := e.client.AppsV1().Deployments(namespace).Get(ctx, hpaName, metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
			r := *d.Spec.Replicas
			lo, hi = min(lo, r), max(hi, r)
			if r < hpaReplicas {
				tl.violate(now, vScaled, "deployment %s has %d replicas", hpaName, r)
			}
		}
		if h, err := e.client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, hpaName, metav1.GetOptions{}); err == nil {
			// 0: not computed yet (minReplicas is 1).
			if r := h.Status.DesiredReplicas; r > 0 && r < hpaReplicas {
				tl.violate(now, vScaled, "HPA %s desires %d replicas", hpaName, r)
			}
		}
	}
}
