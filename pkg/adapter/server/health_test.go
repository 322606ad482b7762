// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
)

type fakeActivity struct {
	targets int
	last    time.Time
}

func (f *fakeActivity) Targets() int          { return f.targets }
func (f *fakeActivity) LastScrape() time.Time { return f.last }

// TestScrapeLoopAlive: each case probes the check at the given times
// before now (the scraper's activity as given), then at now, and checks
// the last answer. A loop's first scrape waits up to an interval: targets
// that the check has just seen appear (at start, or after a time without
// any) do not fail it until three intervals have passed without a scrape.
func TestScrapeLoopAlive(t *testing.T) {
	now := time.Unix(10_000, 0)
	type probe struct {
		before time.Duration // before now
		act    fakeActivity
	}
	longAgo := now.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		earlier []probe
		act     fakeActivity
		wantErr string
	}{
		{"no targets, never scraped", nil, fakeActivity{}, ""},
		{"targets, scraped within three intervals", []probe{{time.Hour, fakeActivity{targets: 5, last: longAgo}}}, fakeActivity{targets: 5, last: now.Add(-2500 * time.Millisecond)}, ""},
		{"targets, last scrape just at the limit", []probe{{time.Hour, fakeActivity{targets: 5, last: longAgo}}}, fakeActivity{targets: 5, last: now.Add(-3 * time.Second)}, ""},
		{"targets, nothing for over three intervals", []probe{{time.Hour, fakeActivity{targets: 5, last: longAgo}}}, fakeActivity{targets: 5, last: now.Add(-3001 * time.Millisecond)}, "no scrape started in 3s"},
		{"targets for over three intervals, never scraped", []probe{{3001 * time.Millisecond, fakeActivity{targets: 1}}}, fakeActivity{targets: 1}, "although there are targets"},
		{"targets just appeared at start, never scraped", nil, fakeActivity{targets: 1}, ""},
		{"targets appeared after a time without any", []probe{{time.Hour, fakeActivity{targets: 1, last: longAgo}}, {10 * time.Minute, fakeActivity{last: longAgo}}, {2 * time.Second, fakeActivity{targets: 1, last: longAgo}}}, fakeActivity{targets: 1, last: longAgo}, ""},
		{"targets appeared after a time without any, not scraped since", []probe{{10 * time.Minute, fakeActivity{last: longAgo}}, {3001 * time.Millisecond, fakeActivity{targets: 1, last: longAgo}}}, fakeActivity{targets: 1, last: longAgo}, "no scrape started in 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakePassiveClock(now)
			act := &fakeActivity{}
			check := scrapeLoopAlive(act, time.Second, clk)
			if check.Name() != "scrape-loop" {
				t.Errorf("name %q, want scrape-loop", check.Name())
			}
			for _, p := range tc.earlier {
				clk.SetTime(now.Add(-p.before))
				*act = p.act
				_ = check.Check(nil)
			}
			clk.SetTime(now)
			*act = tc.act
			err := check.Check(nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected failure: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestInformersSynced(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, tc := range []struct {
		name   string
		synced []cache.InformerSynced
		ok     bool
	}{
		{"no informers", nil, true},
		{"all synced", []cache.InformerSynced{yes, yes}, true},
		{"one not yet", []cache.InformerSynced{yes, no}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := informersSynced(tc.synced)
			if check.Name() != "informers-synced" {
				t.Errorf("name %q, want informers-synced", check.Name())
			}
			if err := check.Check(nil); (err == nil) != tc.ok {
				t.Errorf("Check() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

type fakeCA bool

func (f fakeCA) VerifyOptions() (x509.VerifyOptions, bool) { return x509.VerifyOptions{}, bool(f) }

// TestFrontProxyCALoaded: a replica is not ready until it can verify
// kube-apiserver's proxy certificate.
func TestFrontProxyCALoaded(t *testing.T) {
	for _, tc := range []struct {
		loaded bool
		ok     bool
	}{{true, true}, {false, false}} {
		check := frontProxyCALoaded(fakeCA(tc.loaded))
		if check.Name() != "front-proxy-ca-loaded" {
			t.Errorf("name %q, want front-proxy-ca-loaded", check.Name())
		}
		err := check.Check(nil)
		if (err == nil) != tc.ok {
			t.Errorf("CA loaded %v: Check() = %v, want ok=%v", tc.loaded, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "requestheader-client-ca-file") {
			t.Errorf("error %q does not say which CA", err)
		}
	}
}
