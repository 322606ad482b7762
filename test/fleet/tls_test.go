// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// TestScrapeScheme: --scrape-scheme is http by default, https on request,
// and nothing else; https annotates the pods prometheus.io/scheme: https.
func TestScrapeScheme(t *testing.T) {
	for _, tc := range []struct {
		name            string
		args            []string
		wantErr         string
		wantAnnotations map[string]string
	}{
		{name: "default", wantAnnotations: nil},
		{name: "http", args: []string{"--scrape-scheme=http"}, wantAnnotations: nil},
		{name: "https", args: []string{"--scrape-scheme", "https"}, wantAnnotations: map[string]string{"prometheus.io/scheme": "https"}},
		{name: "upper case", args: []string{"--scrape-scheme=HTTPS"}, wantErr: `--scrape-scheme must be http or https, got "HTTPS"`},
		{name: "empty", args: []string{"--scrape-scheme="}, wantErr: `--scrape-scheme must be http or https, got ""`},
		{name: "other", args: []string{"--scrape-scheme=h2c"}, wantErr: `--scrape-scheme must be http or https, got "h2c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions("/bin")
			if err := o.flagSet(o.flags()).Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("validate = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.podAnnotations(); !maps.Equal(got, tc.wantAnnotations) {
				t.Errorf("pod annotations %v, want %v", got, tc.wantAnnotations)
			}
		})
	}
}

// recordingSink keeps each scrape's outcome.
type recordingSink struct {
	mu   sync.Mutex
	errs []error
	ok   int
}

func (s *recordingSink) Record(_ types.NamespacedName, _ time.Time, page *parse.Page, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && (page == nil || len(page.Models) == 0) {
		err = errNoModel
	}
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	s.ok++
}

var errNoModel = errors.New("the page held no model")

// TestHTTPSFleetScrapedByTheAdaptersScraper: the fleet's certificates and
// TLS serving pass the adapter's own scraper, as the adapter sets it up for
// an https pod (verified against --scrape-ca-file for the pod's DNS name,
// targets.PodDNSName); scrapes reuse one kept connection; a server name
// the certificate does not cover fails verification.
func TestHTTPSFleetScrapedByTheAdaptersScraper(t *testing.T) {
	dir := t.TempDir()
	pki, err := newPodPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "adapter", "parse", "testdata", "vllm-v1.prom"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := splitPage(b)
	if err != nil {
		t.Fatal(err)
	}
	const pod = 251 // 127.2.1.2
	f, err := newFleet(pod, pod+1, p)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := serveTLS(pki.certFile, pki.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// The pod's own address, on a free port rather than pagePort.
	l, err := net.Listen("tcp", net.JoinHostPort(podIP(pod), "0"))
	if err != nil {
		t.Skipf("no loopback address %s here: %v", podIP(pod), err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(tls.NewListener(l, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })

	k8sPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: podName(pod)}, Status: corev1.PodStatus{PodIP: podIP(pod)}}
	url := "https://" + l.Addr().String() + "/metrics"
	target := func(serverName string) scrape.Target {
		return scrape.Target{Pod: types.NamespacedName{Namespace: namespace, Name: podName(pod)}, URL: url, TLSServerName: serverName}
	}
	newManager := func(t *testing.T) (*scrape.Manager, *recordingSink) {
		t.Helper()
		sc := scrape.DefaultConfig()
		sc.Interval, sc.Timeout = 100*time.Millisecond, 90*time.Millisecond
		sc.TLS = scrape.TLSConfig{CAFile: pki.caFile}
		sink := &recordingSink{}
		m, err := scrape.NewManager(sc, sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m, sink
	}

	t.Run("the pod's DNS name, scraped by a loop on one kept connection", func(t *testing.T) {
		m, sink := newManager(t)
		m.SetTargets([]scrape.Target{target(targets.PodDNSName(k8sPod))})
		conns0 := f.conns.Load()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		stop := func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		const scrapes = 5
		deadline := time.Now().Add(10 * time.Second)
		for {
			sink.mu.Lock()
			ok, errs := sink.ok, append([]error(nil), sink.errs...)
			sink.mu.Unlock()
			if len(errs) > 0 {
				stop()
				t.Fatalf("a scrape failed: %v", errs)
			}
			if ok >= scrapes {
				break
			}
			if time.Now().After(deadline) {
				stop()
				t.Fatalf("%d scrapes in 10 s, want %d", ok, scrapes)
			}
			time.Sleep(20 * time.Millisecond)
		}
		stop()
		if n := f.conns.Load() - conns0; n != 1 {
			t.Errorf("%d connections for %d scrapes or more, want 1 kept", n, scrapes)
		}
		if n := f.scrapes[0].Load(); n < scrapes {
			t.Errorf("the pod served %d scrapes, want at least %d", n, scrapes)
		}
	})

	t.Run("another namespace's name fails verification", func(t *testing.T) {
		m, sink := newManager(t)
		other := strings.Replace(targets.PodDNSName(k8sPod), "."+namespace+".", ".other.", 1)
		m.ScrapeNow(context.Background(), []scrape.Target{target(other)})
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if sink.ok != 0 || len(sink.errs) != 1 || !strings.Contains(sink.errs[0].Error(), "not valid for the name") {
			t.Fatalf("%d succeeded, errors %v; want one error saying the certificate is not valid for the name", sink.ok, sink.errs)
		}
	})
}
