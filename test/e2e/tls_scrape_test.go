// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// tlsPagePort is the port of the TLS test's stand-in pods, served at
// loopback addresses outside the kubelet stand-in's 127.0.x.y range and
// the tenant test's 127.1.0.x.
const tlsPagePort = 8000

// tlsPageWaiting is vllm:num_requests_waiting on the page the stand-ins
// serve (pkg/adapter/parse/testdata/vllm-v1.prom): the inference_queue_size
// the adapter must serve for them.
const tlsPageWaiting = 3

// tlsPod is one stand-in pod of TestScrapeOverTLS.
type tlsPod struct {
	name, ip string
	standIn  *framework.MetricsStandIn
}

// TestScrapeOverTLS runs adapters with the HTTPS scraping flags on the real
// control plane, each serving custom.metrics.k8s.io in turn in place of the
// suite's adapter, against model-server stand-ins serving a real vLLM page:
//   - over TLS with a certificate of a test CA given as --scrape-ca-file,
//     verified for the pod's DNS name: served; a certificate of another CA:
//     absent, the 404 saying the certificate is not trusted;
//   - behind a bearer token that the stand-in checks with the real
//     kube-apiserver's TokenReview and SubjectAccessReview (get /metrics),
//     as kube-rbac-proxy does: served with --scrape-bearer-token-file
//     holding a token of a ServiceAccount bound to that right (TokenRequest
//     API); a token without the binding gets 403 and the metric is absent;
//     a pod that asks for the token over plain http is never sent it;
//   - behind mTLS (a client certificate of the mesh's CA required):
//     refused without --scrape-client-cert-file, served with it.
func TestScrapeOverTLS(t *testing.T) {
	e := requireEnv(t, framework.ComponentAdapter)
	ns := e.Namespace(t)
	c := e.ControlPlane.Client
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	page, err := os.ReadFile(filepath.Join("..", "..", "pkg", "adapter", "parse", "testdata", "vllm-v1.prom"))
	if err != nil {
		t.Fatal(err)
	}
	podCA := newTestCA(t, "e2e-pod-ca")
	otherCA := newTestCA(t, "e2e-other-ca")
	meshCA := newTestCA(t, "e2e-mesh-ca")
	caBundle := filepath.Join(dir, "scrape-ca.pem")
	if err := os.WriteFile(caBundle, append(append([]byte{}, podCA.CertPEM...), meshCA.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	meshName := "vllm-mtls." + ns + ".svc"

	// The tokens: one of a ServiceAccount bound to get /metrics, one of a
	// ServiceAccount without that binding.
	goodToken, binding, err := framework.ServiceAccountToken(ctx, c, ns, "metrics-scraper", true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := framework.DeleteClusterRBAC(ctx, c, binding); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	badToken, _, err := framework.ServiceAccountToken(ctx, c, ns, "no-metrics-role", false)
	if err != nil {
		t.Fatal(err)
	}
	goodTokenFile, badTokenFile := filepath.Join(dir, "good-token"), filepath.Join(dir, "bad-token")
	for f, tok := range map[string]string{goodTokenFile: goodToken, badTokenFile: badToken} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	https := map[string]string{"inference-metrics-adapter/scrape": "true", "prometheus.io/scheme": "https"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	pods := map[string]*tlsPod{}
	start := func(name, ip string, cfg framework.StandInConfig, annotations map[string]string) {
		t.Helper()
		cfg.Addr, cfg.Page = framework.StandInAddr(ip, tlsPagePort), page
		s, err := framework.StartMetricsStandIn(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("stop stand-in %s: %v", name, err)
			}
		})
		if _, err := framework.CreateRunningPod(ctx, c, ns, name, ip, tlsPagePort, annotations); err != nil {
			t.Fatal(err)
		}
		pods[name] = &tlsPod{name: name, ip: ip, standIn: s}
	}
	serverCert := func(ca *framework.CA, name string) *framework.KeyPair {
		t.Helper()
		kp, err := ca.Issue(framework.CertSpec{CommonName: name, DNSNames: []string{name}, Server: true})
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	const (
		trusted    = "https-trusted"
		untrusted  = "https-other-ca"
		bearer     = "https-bearer"
		plainAsker = "http-asks-bearer"
		mtls       = "mtls"
	)
	ips := map[string]string{trusted: "127.1.31.2", untrusted: "127.1.31.3", bearer: "127.1.31.4", plainAsker: "127.1.31.5", mtls: "127.1.31.6"}
	// Certificates for the pod's DNS name, the adapter's default server name.
	start(trusted, ips[trusted], framework.StandInConfig{Cert: serverCert(podCA, framework.PodDNSName(ips[trusted], ns))}, https)
	start(untrusted, ips[untrusted], framework.StandInConfig{Cert: serverCert(otherCA, framework.PodDNSName(ips[untrusted], ns))}, https)
	start(bearer, ips[bearer], framework.StandInConfig{Cert: serverCert(podCA, framework.PodDNSName(ips[bearer], ns)), Reviewer: c},
		with(https, "inference-metrics-adapter/scrape-auth", "bearer"))
	start(plainAsker, ips[plainAsker], framework.StandInConfig{Reviewer: c},
		map[string]string{"inference-metrics-adapter/scrape": "true", "inference-metrics-adapter/scrape-auth": "bearer"})
	// The mesh's certificate names the Service, not the pod: tls-server-name says so.
	start(mtls, ips[mtls], framework.StandInConfig{Cert: serverCert(meshCA, meshName), ClientCA: meshCA},
		with(https, "inference-metrics-adapter/tls-server-name", meshName))

	clientCert, err := meshCA.Issue(framework.CertSpec{CommonName: "inference-metrics-adapter", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := clientCert.Write(dir, "scrape-client"); err != nil {
		t.Fatal(err)
	}

	// Adapter A: the CA bundle and the bound ServiceAccount's token, no
	// client certificate.
	// Each phase starts with a value that only its adapter can serve (the
	// suite's adapter trusts neither CA): from then on the aggregator
	// routes to it, and the 404s that follow are its own.
	a := startTLSAdapter(ctx, t, e, "-tls-a", "--scrape-ca-file="+caBundle, "--scrape-bearer-token-file="+goodTokenFile)
	restore := serveCustomMetrics(ctx, t, a)
	t.Run("trusted CA served", func(t *testing.T) {
		waitServed(ctx, t, e, ns, trusted)
		if got := pods[trusted].standIn.Authorizations(); len(got) != 0 {
			t.Errorf("%s does not ask for the token but was sent %d Authorization headers", trusted, len(got))
		}
	})
	t.Run("another CA left out", func(t *testing.T) {
		waitAbsent(ctx, t, e, ns, untrusted, "the server's certificate is not trusted (it does not chain to a CA of the scrape CA bundle)")
	})
	t.Run("token checked by TokenReview and SubjectAccessReview", func(t *testing.T) {
		waitServed(ctx, t, e, ns, bearer)
		s := pods[bearer].standIn
		seen := s.Authorizations()
		good := 0
		for _, h := range seen {
			if h == "Bearer "+goodToken {
				good++
			}
		}
		if good == 0 {
			t.Errorf("%s served the page but never saw the bound ServiceAccount's token (%d headers)", bearer, len(seen))
		}
		if n := s.Answers()[200]; n == 0 {
			t.Errorf("%s answered no 200 after its reviews: %v", bearer, s.Answers())
		}
		t.Logf("%s: %d requests with the bound token, answers by status %v", bearer, good, s.Answers())
	})
	t.Run("token never over plain http", func(t *testing.T) {
		// The pod is left out when the adapter picks its targets, like a
		// pod with any other bad annotation: the reason is in the log (at
		// -v=2), and the 404 says it too, naming the annotation.
		want := "pod=\"" + ns + "/" + plainAsker + "\" err=\"annotation inference-metrics-adapter/scrape-auth=bearer: the bearer token is only sent over https"
		waitLogLine(ctx, t, a, want)
		waitAbsent(ctx, t, e, ns, plainAsker, "pod "+ns+"/"+plainAsker+": not scraped: annotation inference-metrics-adapter/scrape-auth=bearer: the bearer token is only sent over https")
		s := pods[plainAsker].standIn
		if got := s.Authorizations(); len(got) != 0 {
			t.Errorf("%s (plain http) was sent %d Authorization headers, want none", plainAsker, len(got))
		}
		if got := s.Answers(); len(got) != 0 {
			t.Errorf("%s (plain http, asks for the token) was requested at all: answers by status %v", plainAsker, got)
		}
	})
	t.Run("mTLS refused without a client certificate", func(t *testing.T) {
		waitAbsent(ctx, t, e, ns, mtls, "remote error: tls: certificate required")
		errs := strings.Join(pods[mtls].standIn.Errors(), "\n")
		if !strings.Contains(errs, "client didn't provide a certificate") {
			t.Errorf("the mTLS stand-in did not see a handshake without a client certificate; its errors:\n%s", errs)
		}
	})
	restore()
	forbiddenBefore := pods[bearer].standIn.Answers()[403]

	// Adapter B: the mesh CA's client certificate, and the token of the
	// ServiceAccount without the binding.
	b := startTLSAdapter(ctx, t, e, "-tls-b", "--scrape-ca-file="+caBundle, "--scrape-bearer-token-file="+badTokenFile,
		"--scrape-client-cert-file="+clientCert.CertFile, "--scrape-client-key-file="+clientCert.KeyFile)
	restore = serveCustomMetrics(ctx, t, b)
	t.Run("mTLS served with the client certificate", func(t *testing.T) {
		waitServed(ctx, t, e, ns, mtls)
	})
	t.Run("token without the RBAC binding gets 403", func(t *testing.T) {
		waitAbsent(ctx, t, e, ns, bearer, "HTTP 403 Forbidden")
		s := pods[bearer].standIn
		if s.Answers()[403] <= forbiddenBefore {
			t.Errorf("%s: the stand-in gave no 403 to the unbound token: %v", bearer, s.Answers())
		}
		sawBad := false
		for _, h := range s.Authorizations() {
			sawBad = sawBad || h == "Bearer "+badToken
		}
		if !sawBad {
			t.Errorf("%s never saw the unbound ServiceAccount's token", bearer)
		}
	})
	restore()
}

// newTestCA is framework.NewCA or the end of t.
func newTestCA(t *testing.T, name string) *framework.CA {
	t.Helper()
	ca, err := framework.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// startTLSAdapter starts an adapter registered under no APIService, with
// the suite's flags and args, stopped when t ends.
func startTLSAdapter(ctx context.Context, t *testing.T, e *framework.Environment, suffix string, args ...string) *framework.Adapter {
	t.Helper()
	a, err := framework.StartAdapter(ctx, e.ControlPlane, framework.AdapterConfig{
		Binary:            e.Adapter.Config().Binary,
		Namespace:         framework.AdapterNamespace,
		Service:           framework.AdapterService + suffix,
		Args:              append(framework.AdapterArgs(), args...),
		SkipCustomMetrics: true,
	})
	if err != nil {
		t.Fatalf("start adapter %s: %v", suffix, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop adapter %s: %v", suffix, err)
		}
	})
	return a
}

// serveCustomMetrics points custom.metrics.k8s.io at a until the returned
// function, or the end of t, points it back at the suite's adapter.
func serveCustomMetrics(ctx context.Context, t *testing.T, a *framework.Adapter) func() {
	t.Helper()
	back, err := a.ServeCustomMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	restore := func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := back(ctx); err != nil {
			t.Errorf("point custom.metrics.k8s.io back at the suite's adapter: %v", err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// waitServed waits until pod's inference_queue_size is the page's value.
func waitServed(ctx context.Context, t *testing.T, e *framework.Environment, ns, pod string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		v, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.PodKind, pod, metricQueue)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got := v.Value.AsApproximateFloat64()
		last = fmt.Sprintf("value %g", got)
		return got == tlsPageWaiting, nil
	})
	if err != nil {
		t.Fatalf("%s's %s not served as %d (last: %s): %v", pod, metricQueue, tlsPageWaiting, last, err)
	}
	t.Logf("%s: %s = %d through custom.metrics.k8s.io", pod, metricQueue, tlsPageWaiting)
}

// waitAbsent waits until asking for pod's inference_queue_size answers a
// 404 whose message contains reason, and fails if it is ever served.
func waitAbsent(ctx context.Context, t *testing.T, e *framework.Environment, ns, pod, reason string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		v, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.PodKind, pod, metricQueue)
		if err == nil {
			return false, fmt.Errorf("%s's %s served (%s), want it left out", pod, metricQueue, v.Value.String())
		}
		var status apierrors.APIStatus
		if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
			last = err.Error()
			return false, nil
		}
		last = status.Status().Message
		return strings.Contains(last, reason), nil
	})
	if err != nil {
		t.Fatalf("%s's %s: want a 404 saying %q (last: %s): %v", pod, metricQueue, reason, last, err)
	}
	t.Logf("%s: 404 %q", pod, last)
}

// waitLogLine waits until a's log has a line containing want.
func waitLogLine(ctx context.Context, t *testing.T, a *framework.Adapter, want string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(a.Process.LogPath)
		if err != nil {
			return false, err
		}
		return strings.Contains(string(log), want), nil
	})
	if err != nil {
		t.Fatalf("adapter log %s: no line with %q: %v\n%s", a.Process.LogPath, want, err, a.Process.Tail(20))
	}
	t.Logf("adapter log: %s", want)
}
