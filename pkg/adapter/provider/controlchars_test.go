// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// A 404's or a 400's message is printed by kubectl and by `kubectl describe
// hpa` as it is: whatever the stored scrape error (page and URL text), the
// metric or the object name asked about hold, it has no control character.
func TestAnswerErrorsHoldNoControlCharacters(t *testing.T) {
	const evil = "\x1b]0;owned\x07\x1b[2J\nI1202 forged\u009b31m\u202e\xff"
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := store.New()
	st.Record(types.NamespacedName{Namespace: "ns", Name: "failed"}, now.Add(-time.Second), nil, errors.New("scraping http://10.0.0.1/ of pod ns/failed: parse: "+evil))
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pi := idx()
	if err := pi.Add(pod("failed", map[string]string{"app": "broken"}, true, true, nil)); err != nil {
		t.Fatal(err)
	}
	prov := New(Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(idx()), StatefulSets: appslisters.NewStatefulSetLister(idx())},
		st, &recordingDemand{}, testclock.NewFakePassiveClock(now))
	queue := catalog.QueueSize.Name()
	info := func(gr schema.GroupResource, metric string) cmprovider.CustomMetricInfo {
		return cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: metric}
	}
	ctx := context.Background()
	cases := []struct {
		name string
		ask  func() error
		code int32
	}{
		{"stored scrape error, pods by selector", func() error {
			_, err := prov.GetMetricBySelector(ctx, "ns", labels.SelectorFromSet(labels.Set{"app": "broken"}), info(podsGR, queue), labels.Everything())
			return err
		}, 404},
		{"stored scrape error, pod by name", func() error {
			_, err := prov.GetMetricByName(ctx, types.NamespacedName{Namespace: "ns", Name: "failed"}, info(podsGR, queue), labels.Everything())
			return err
		}, 404},
		{"metric name", func() error {
			_, err := prov.GetMetricBySelector(ctx, "ns", labels.SelectorFromSet(labels.Set{"app": "broken"}), info(podsGR, queue+evil), labels.Everything())
			return err
		}, 404},
		{"pod name", func() error {
			_, err := prov.GetMetricByName(ctx, types.NamespacedName{Namespace: "ns", Name: "x" + evil}, info(podsGR, queue), labels.Everything())
			return err
		}, 404},
		{"deployment name", func() error {
			_, err := prov.GetMetricByName(ctx, types.NamespacedName{Namespace: "ns", Name: "x" + evil}, info(deploymentsGR, queue), labels.Everything())
			return err
		}, 404},
		{"namespace of a front-door list question", func() error {
			_, err := prov.GetMetricBySelector(ctx, "ns"+evil, labels.Everything(), info(servicesGR, catalog.FrontDoorPendingRequests), labels.Everything())
			return err
		}, 404},
		{"service name asked across namespaces", func() error {
			_, err := prov.GetMetricByName(ctx, types.NamespacedName{Name: "x" + evil}, info(servicesGR, catalog.FrontDoorPendingRequests), labels.Everything())
			return err
		}, 400},
		{"pod name asked across namespaces", func() error {
			_, err := prov.GetMetricByName(ctx, types.NamespacedName{Name: "x" + evil}, info(podsGR, queue), labels.Everything())
			return err
		}, 400},
		{"external metric name", func() error {
			_, err := prov.External().GetExternalMetric(ctx, "ns", labels.SelectorFromSet(labels.Set{"app": "broken"}), cmprovider.ExternalMetricInfo{Metric: queue + evil})
			return err
		}, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ask()
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("error %v, want an API status", err)
			}
			if got := status.Status().Code; got != tc.code {
				t.Fatalf("code %d (%q), want %d", got, status.Status().Message, tc.code)
			}
			if msg := status.Status().Message; escapetest.HasControl(msg) {
				t.Fatalf("the message holds a control character or invalid UTF-8: %q", msg)
			}
		})
	}
}

// The escaping keeps printable text as it is and makes every control
// character, bidirectional override and invalid byte visible.
