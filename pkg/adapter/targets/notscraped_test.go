// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape/escapetest"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// TestNotScrapedSaysWhy: a Running pod left out of the targets for a bad or
// forbidden annotation has a reason, naming where the refused setting came
// from (the pod's annotation, or its server in --server-config), printable
// and bounded; a pod that may be scraped, one not Running and a gpu-agent
// have none. The tracker leaves each pod with a reason out of its targets.
// Was wrong: the reason was only logged at -v=2, and the 404 said "not
// scraped yet"; a bearer token asked for by --server-config was reported as
// the pod's annotation.
func TestNotScrapedSaysWhy(t *testing.T) {
	servers, err := parse.NewServers([]parse.CustomServer{{Name: "secure", Queue: parse.Series{Name: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	port := corev1.ContainerPort{Name: "metrics", ContainerPort: 8000}
	pending := testPod("pending", map[string]string{AnnotationScrapeAuth: "bearer"}, port)
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	agent := testPod("agent", map[string]string{AnnotationScrapeAuth: "bearer"}, port)
	agent.Namespace = "gpu"
	yes := true
	agent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "gpu-agent", UID: "ds", Controller: &yes}}
	cases := []struct {
		name    string
		pod     *corev1.Pod
		want    []string // in the reason; none: no reason
		notWant []string
	}{
		{name: "bearer annotation over plain http", pod: testPod("plain", map[string]string{AnnotationScrapeAuth: "bearer"}, port),
			want: []string{`annotation inference-metrics-adapter/scrape-auth=bearer: the bearer token is only sent over https, and the scheme is http (from the default; set prometheus.io/scheme: https)`}},
		{name: "bearer annotation, http annotation", pod: testPod("both", map[string]string{AnnotationScrapeAuth: "bearer", AnnotationScheme: "http"}, port),
			want: []string{`annotation inference-metrics-adapter/scrape-auth=bearer: the bearer token is only sent over https, and the scheme is http (from annotation prometheus.io/scheme="http"`}},
		{name: "bearer from --server-config, http annotation", pod: testPod("cfg", map[string]string{AnnotationServer: "secure", AnnotationScheme: "http"}, port),
			want:    []string{`--server-config server "secure" sets auth: bearer: the bearer token is only sent over https, and the scheme is http (from annotation prometheus.io/scheme="http"`},
			notWant: []string{AnnotationScrapeAuth}},
		{name: "unknown server, hostile text", pod: testPod("evil", map[string]string{AnnotationServer: "x\x1b[2J\u202e\nfake log line"}, port),
			want: []string{`annotation inference-metrics-adapter/server="x\x1b[2J\u202e\nfake log line": unknown server`}},
		{name: "bad port", pod: testPod("port", map[string]string{AnnotationPort: "http"}, port),
			want: []string{`annotation prometheus.io/port="http": not a port number`}},
		{name: "a long value is quoted in part", pod: testPod("long", map[string]string{AnnotationScheme: strings.Repeat("h", 100000)}, port),
			want: []string{`annotation prometheus.io/scheme="` + strings.Repeat("h", 64) + `": want http or https`}},
		{name: "a good pod", pod: testPod("good", map[string]string{AnnotationServer: "secure"}, port)},
		{name: "bearer over https", pod: testPod("tls", map[string]string{AnnotationScrapeAuth: "bearer", AnnotationScheme: "https"}, port)},
		{name: "not Running", pod: pending},
		{name: "a gpu-agent", pod: agent},
	}
	pods := make([]*corev1.Pod, 0, len(cases))
	for _, tc := range cases {
		tc.pod.Annotations[AnnotationScrape] = "true"
		pods = append(pods, tc.pod)
	}
	setter := &recSetter{}
	agentSel := labels.SelectorFromSet(labels.Set{"app": "agent"})
	tr := New(Config{DemandTTL: time.Minute, Resync: time.Second, Servers: servers, AgentSelector: agentSel, AgentNamespace: "gpu",
		ServerScrape: map[string]ScrapeSettings{"secure": {Scheme: SchemeHTTPS, Auth: AuthBearer}}},
		corelisters.NewPodLister(podIndex(t, pods...)), testScraper{setter, &recProber{}}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
	tr.Reconcile()
	targeted := map[string]bool{}
	for _, tg := range setter.last {
		targeted[tg.Pod.Name] = true
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, ok := tr.NotScraped(tc.pod)
			if ok != (len(tc.want) > 0) {
				t.Fatalf("NotScraped = %q, %v; want a reason: %v", why, ok, len(tc.want) > 0)
			}
			if ok && targeted[tc.pod.Name] {
				t.Errorf("%s has a reason (%q) but is a target", tc.pod.Name, why)
			}
			if !ok && tc.pod.Status.Phase == corev1.PodRunning && !targeted[tc.pod.Name] {
				t.Errorf("%s has no reason but is no target", tc.pod.Name)
			}
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("reason %q, want it to contain %q", why, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(why, w) {
					t.Errorf("reason %q names %q", why, w)
				}
			}
			if escapetest.HasControl(why) || len(why) > MaxNotScrapedLen+len("...") {
				t.Errorf("reason %q (%d bytes): want printable and at most %d bytes", why, len(why), MaxNotScrapedLen+len("..."))
			}
		})
	}
	if _, ok := tr.NotScraped(nil); ok {
		t.Error("NotScraped(nil) gave a reason")
	}
}
