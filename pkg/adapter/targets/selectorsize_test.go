// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// selectorOfLen returns a selector that matches pods labelled app=a and
// whose String() is n bytes long (n ≥ 20): app=a,x notin (v000000,…,www).
func selectorOfLen(t *testing.T, n int) labels.Selector {
	t.Helper()
	const head, value = "app=a,x notin (", "v%06d"
	var vals []string
	need := n - len(head) - len("w)")
	for ; need > 62; need -= len("v000000,") { // a label value has at most 63 bytes

		vals = append(vals, fmt.Sprintf(value, len(vals)))
	}
	vals = append(vals, "w"+strings.Repeat("w", need))
	sel, err := labels.Parse(head + strings.Join(vals, ",") + ")")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(sel.String()); got != n {
		t.Fatalf("selector of %d bytes, want %d", got, n)
	}
	return sel
}

// TestHugeSelectorCreatesNoDemand: a metrics reader chooses the label
// selector, and a URL may carry one of about 1 MiB (a long "notin" list).
// Kept as demand, 64 of them in one namespace held about 150 MiB and 2,048
// over the cluster would hold gigabytes: a selector longer than
// MaxSelectorLen is answered (its never-scraped pods are scraped once) but
// kept as no demand, so demand's memory is bounded in bytes, not only in
// entries.
func TestHugeSelectorCreatesNoDemand(t *testing.T) {
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	tests := []struct {
		name       string
		len        int
		wantDemand int
	}{
		{"short", 64, 1},
		{"at the bound", MaxSelectorLen, 1},
		{"over the bound", MaxSelectorLen + 1, 0},
		{"a mebibyte", 1 << 20, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := testPod("a", nil, port)
			setter, prober := &recSetter{}, &recProber{}
			tr := New(Config{DemandTTL: time.Minute, FirstScrapeTimeout: time.Second, Resync: time.Second},
				corelisters.NewPodLister(podIndex(t, a)), testScraper{setter, prober}, testStore{knownSet{}, &retained{}}, testclock.NewFakePassiveClock(time.Unix(1000, 0)))
			sel := selectorOfLen(t, tc.len)
			if !sel.Matches(labels.Set(a.Labels)) {
				t.Fatalf("selector %.40q… does not match pod a", sel.String())
			}
			tr.Want(context.Background(), "ns", sel, []*corev1.Pod{a})
			if got := tr.demand.len("ns"); got != tc.wantDemand {
				t.Errorf("selector of %d bytes: %d demand entries, want %d", len(sel.String()), got, tc.wantDemand)
			}
			if fmt.Sprint(prober.scraped) != "[a]" {
				t.Errorf("first scrape of %v, want the never-scraped pod a", prober.scraped)
			}
			tr.Reconcile()
			if want := map[int]string{0: "[]", 1: "[a]"}[tc.wantDemand]; names(setter.last) != want {
				t.Errorf("targets %s, want %s", names(setter.last), want)
			}
		})
	}
}
