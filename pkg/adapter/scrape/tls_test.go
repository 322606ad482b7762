// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate signed by ca for the DNS names and IPs
// given, usable by a server, or by a client when client is set, with its
// PEM certificate and key.
func (ca *testCA) issue(t testing.TB, cn string, client bool, names ...string) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// writeFile writes data to dir/name with a modification time of its own
// (a rewrite within the file system's timestamp granularity still shows).
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	mod := time.Now().Add(time.Duration(serial.Add(1)) * time.Second)
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsPage is a loopback HTTPS server of a small page that records each
// request's Authorization header, the connections it accepted and whether
// each handshake resumed a session.
type tlsPage struct {
	srv     *httptest.Server
	mu      sync.Mutex
	auth    []string
	resumed []bool
	conns   atomic.Int64
}

const tlsPageBody = "vllm:num_requests_waiting 3\n"

// newTLSPage serves with cert; clientCAs, when set, requires a client
// certificate signed by it. handler, when set, replaces the page.
func newTLSPage(t testing.TB, cert tls.Certificate, clientCAs *x509.CertPool, handler http.HandlerFunc) *tlsPage {
	t.Helper()
	p := &tlsPage{}
	if handler == nil {
		handler = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tlsPageBody)) }
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.auth = append(p.auth, r.Header.Get("Authorization"))
		p.resumed = append(p.resumed, r.TLS.DidResume)
		p.mu.Unlock()
		handler(w, r)
	}))
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		p.srv.TLS.ClientCAs = clientCAs
		p.srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	p.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			p.conns.Add(1)
		}
	}
	p.srv.Config.ErrorLog = nil
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

func (p *tlsPage) url() string { return p.srv.URL + "/metrics" }

func (p *tlsPage) seen() (auth []string, resumed []bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth...), append([]bool(nil), p.resumed...)
}

func testCredentials(t testing.TB, c TLSConfig) *credentials {
	t.Helper()
	cr, err := newCredentials(c)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

func tlsEndpoint(t testing.TB, tg Target, cr *credentials) *endpoint {
	t.Helper()
	ep, err := newTargetEndpoint(tg, false, time.Minute, cr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ep.close)
	return ep
}

// TestTLSVerification scrapes a loopback HTTPS page under each
// verification setting: the CA bundle and server name that match succeed;
// another CA, or a certificate for another name, fail with a reason that
// says so.
func TestTLSVerification(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := newTestCA(t, "scrape-ca"), newTestCA(t, "other-ca")
	caFile := writeFile(t, dir, "ca.pem", ca.pem)
	otherFile := writeFile(t, dir, "other.pem", other.pem)
	cert, _, _ := ca.issue(t, "vllm", false, "10-0-0-5.llm.pod", "vllm.llm.svc", "127.0.0.1")
	page := newTLSPage(t, cert, nil, nil)

	for _, tc := range []struct {
		name       string
		cfg        TLSConfig
		serverName string
		wantErr    string // "" for success
	}{
		{name: "CA and pod DNS name", cfg: TLSConfig{CAFile: caFile}, serverName: "10-0-0-5.llm.pod"},
		{name: "CA and service name", cfg: TLSConfig{CAFile: caFile}, serverName: "vllm.llm.svc"},
		{name: "CA and the URL's IP", cfg: TLSConfig{CAFile: caFile}},
		{name: "another CA", cfg: TLSConfig{CAFile: otherFile}, serverName: "vllm.llm.svc", wantErr: "certificate is not trusted"},
		{name: "system roots", cfg: TLSConfig{}, serverName: "vllm.llm.svc", wantErr: "certificate is not trusted"},
		{name: "another name", cfg: TLSConfig{CAFile: caFile}, serverName: "tgi.llm.svc", wantErr: `not valid for the name "tgi.llm.svc"`},
		{name: "insecure skip verify", cfg: TLSConfig{CAFile: otherFile, InsecureSkipVerify: true}, serverName: "tgi.llm.svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ep := tlsEndpoint(t, Target{URL: page.url(), TLSServerName: tc.serverName}, testCredentials(t, tc.cfg))
			w := newWorker()
			n, err := w.get(context.Background(), time.Now().Add(waitLimit), ep, 1<<20)
			if tc.wantErr == "" {
				if err != nil || string(w.buf[:n]) != tlsPageBody {
					t.Fatalf("got %q, %v; want the page", w.buf[:n], err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ReasonOf(err) != ReasonConnection {
				t.Fatalf("error %v (reason %q), want reason connection and one containing %q", err, ReasonOf(err), tc.wantErr)
			}
		})
	}
}

// TestBearerTokenSelection: the token goes only over verified HTTPS, only
// to a target that asks for it, and to a host-network pod only when
// allowed; a target that asks where the rules forbid it is refused before
// anything is sent. A redirect is not followed, so the token never goes
// to the place it names.
func TestBearerTokenSelection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "scrape-ca")
	caFile := writeFile(t, dir, "ca.pem", ca.pem)
	tokenFile := writeFile(t, dir, "token", []byte("  s3cret-token\n"))
	cert, _, _ := ca.issue(t, "vllm", false, "127.0.0.1")
	page := newTLSPage(t, cert, nil, nil)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("plain http server got an Authorization header")
		}
		_, _ = w.Write([]byte(tlsPageBody))
	}))
	t.Cleanup(plain.Close)

	withToken := TLSConfig{CAFile: caFile, BearerTokenFile: tokenFile}
	for _, tc := range []struct {
		name     string
		cfg      TLSConfig
		target   Target
		wantAuth string // the Authorization header the page saw
		wantErr  string // a refused target: nothing sent
	}{
		{name: "https, asks", cfg: withToken, target: Target{URL: page.url(), Auth: AuthBearer}, wantAuth: "Bearer s3cret-token"},
		{name: "https, does not ask", cfg: withToken, target: Target{URL: page.url()}, wantAuth: ""},
		{name: "plain http, asks", cfg: withToken, target: Target{URL: plain.URL + "/metrics", Auth: AuthBearer}, wantErr: "only sent over https"},
		{name: "plain http, does not ask", cfg: withToken, target: Target{URL: plain.URL + "/metrics"}},
		{name: "host network, asks", cfg: withToken, target: Target{URL: page.url(), Auth: AuthBearer, HostNetwork: true}, wantErr: "host-network pod"},
		{name: "host network, allowed", cfg: TLSConfig{CAFile: caFile, BearerTokenFile: tokenFile, TokenToHostNetwork: true},
			target: Target{URL: page.url(), Auth: AuthBearer, HostNetwork: true}, wantAuth: "Bearer s3cret-token"},
		{name: "no token file", cfg: TLSConfig{CAFile: caFile}, target: Target{URL: page.url(), Auth: AuthBearer}, wantErr: "no token file"},
		{name: "not verified", cfg: TLSConfig{BearerTokenFile: tokenFile, InsecureSkipVerify: true},
			target: Target{URL: page.url(), Auth: AuthBearer}, wantErr: "never sent while certificates are not verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := testCredentials(t, tc.cfg)
			before, _ := page.seen()
			ep, err := newTargetEndpoint(tc.target, false, time.Minute, cr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if after, _ := page.seen(); len(after) != len(before) {
					t.Fatalf("the page was asked %d times, want 0", len(after)-len(before))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ep.close)
			if err := getOnce(t, newWorker(), ep, 1<<20); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tc.target.URL, "https") {
				return
			}
			after, _ := page.seen()
			if len(after) != len(before)+1 || after[len(after)-1] != tc.wantAuth {
				t.Fatalf("Authorization headers %q after %q, want one more: %q", after, before, tc.wantAuth)
			}
		})
	}

	t.Run("redirect not followed", func(t *testing.T) {
		var elsewhere atomic.Int64
		target := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
		t.Cleanup(target.Close)
		redirect := newTLSPage(t, cert, nil, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/steal", http.StatusFound)
		})
		ep := tlsEndpoint(t, Target{URL: redirect.url(), Auth: AuthBearer}, testCredentials(t, withToken))
		err := getOnce(t, newWorker(), ep, 1<<20)
		if ReasonOf(err) != ReasonRedirect {
			t.Fatalf("error %v, want reason redirect", err)
		}
		if got := elsewhere.Load(); got != 0 {
			t.Fatalf("the redirect's target was asked %d times, want 0", got)
		}
		if auth, _ := redirect.seen(); len(auth) != 1 {
			t.Fatalf("%d requests to the redirecting page, want 1", len(auth))
		}
	})
}

// TestCredentialReloads: a rotated CA bundle, client certificate or token
// is used once the files change (after ReloadCheck), and a bad new file
// keeps the previous one.
func TestCredentialReloads(t *testing.T) {
	t.Parallel()
	const check = 20 * time.Millisecond
	wait := func() { time.Sleep(3 * check) }

	t.Run("CA bundle", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		oldCA, newCA := newTestCA(t, "old"), newTestCA(t, "new")
		caFile := writeFile(t, dir, "ca.pem", oldCA.pem)
		oldCert, _, _ := oldCA.issue(t, "old", false, "127.0.0.1")
		newCert, _, _ := newCA.issue(t, "new", false, "127.0.0.1")
		oldPage, newPage := newTLSPage(t, oldCert, nil, nil), newTLSPage(t, newCert, nil, nil)
		cr := testCredentials(t, TLSConfig{CAFile: caFile, ReloadCheck: check})
		scrape := func(p *tlsPage) error {
			ep := tlsEndpoint(t, Target{URL: p.url()}, cr)
			return getOnce(t, newWorker(), ep, 1<<20)
		}
		if err := scrape(oldPage); err != nil {
			t.Fatalf("old CA: %v", err)
		}
		if err := scrape(newPage); err == nil || !strings.Contains(err.Error(), "not trusted") {
			t.Fatalf("new page before the rotation: %v, want not trusted", err)
		}
		writeFile(t, dir, "ca.pem", append(append([]byte{}, oldCA.pem...), newCA.pem...))
		wait()
		if err := scrape(newPage); err != nil {
			t.Fatalf("new page after the rotation: %v", err)
		}
		writeFile(t, dir, "ca.pem", []byte("not a certificate"))
		wait()
		if err := scrape(newPage); err != nil {
			t.Fatalf("after a bad CA file: %v; want the previous bundle kept", err)
		}
		writeFile(t, dir, "ca.pem", newCA.pem)
		wait()
		if err := scrape(oldPage); err == nil || !strings.Contains(err.Error(), "not trusted") {
			t.Fatalf("old page after the old CA left the bundle: %v, want not trusted", err)
		}
	})

	t.Run("token", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		ca := newTestCA(t, "ca")
		cert, _, _ := ca.issue(t, "p", false, "127.0.0.1")
		page := newTLSPage(t, cert, nil, nil)
		tokenFile := writeFile(t, dir, "token", []byte("first"))
		cr := testCredentials(t, TLSConfig{CAFile: writeFile(t, dir, "ca.pem", ca.pem), BearerTokenFile: tokenFile, ReloadCheck: check})
		ep := tlsEndpoint(t, Target{URL: page.url(), Auth: AuthBearer}, cr)
		w := newWorker()
		for _, step := range []struct{ write, want string }{
			{"", "Bearer first"},
			{"second\n", "Bearer second"},
			{"bad token\n", "Bearer second"}, // a space: refused, the previous kept
			{"", "Bearer second"},
			{"third", "Bearer third"},
		} {
			if step.write != "" {
				writeFile(t, dir, "token", []byte(step.write))
				wait()
			}
			if err := getOnce(t, w, ep, 1<<20); err != nil {
				t.Fatal(err)
			}
			auth, _ := page.seen()
			if got := auth[len(auth)-1]; got != step.want {
				t.Fatalf("after writing %q: Authorization %q, want %q", step.write, got, step.want)
			}
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		serverCA, clientCA, otherCA := newTestCA(t, "server"), newTestCA(t, "client"), newTestCA(t, "other")
		cert, _, _ := serverCA.issue(t, "p", false, "127.0.0.1")
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		page := newTLSPage(t, cert, pool, nil)
		_, goodCert, goodKey := clientCA.issue(t, "adapter", true)
		_, badCert, badKey := otherCA.issue(t, "adapter", true)
		certFile, keyFile := writeFile(t, dir, "tls.crt", goodCert), writeFile(t, dir, "tls.key", goodKey)
		cr := testCredentials(t, TLSConfig{CAFile: writeFile(t, dir, "ca.pem", serverCA.pem),
			ClientCertFile: certFile, ClientKeyFile: keyFile, ReloadCheck: check})
		scrape := func() error {
			ep := tlsEndpoint(t, Target{URL: page.url()}, cr) // a new connection each time
			return getOnce(t, newWorker(), ep, 1<<20)
		}
		if err := scrape(); err != nil {
			t.Fatalf("with the client CA's certificate: %v", err)
		}
		writeFile(t, dir, "tls.crt", badCert)
		writeFile(t, dir, "tls.key", badKey)
		wait()
		if err := scrape(); err == nil {
			t.Fatal("with another CA's certificate: served, want refused")
		}
		writeFile(t, dir, "tls.key", goodKey) // a pair that does not match: the previous kept
		wait()
		if err := scrape(); err == nil {
			t.Fatal("after a mismatched pair: served, want the previous (refused) certificate kept")
		}
		writeFile(t, dir, "tls.crt", goodCert)
		wait()
		if err := scrape(); err != nil {
			t.Fatalf("back to the client CA's certificate: %v", err)
		}
	})
}

// TestClientCertificateRequired is the model-server stand-in of a mesh's
// STRICT mTLS or of a kube-rbac-proxy requiring client certificates: a
// page that requires a client certificate signed by a given CA refuses
// the adapter without one, or with one of another CA, and serves it with
// one of that CA.
func TestClientCertificateRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	meshCA, otherCA := newTestCA(t, "mesh-root"), newTestCA(t, "other")
	serverCert, _, _ := meshCA.issue(t, "vllm", false, "vllm.llm.svc")
	pool := x509.NewCertPool()
	pool.AddCert(meshCA.cert)
	page := newTLSPage(t, serverCert, pool, nil)
	caFile := writeFile(t, dir, "root-cert.pem", meshCA.pem)
	_, meshCert, meshKey := meshCA.issue(t, "inference-metrics-adapter", true)
	_, otherCert, otherKey := otherCA.issue(t, "inference-metrics-adapter", true)

	for _, tc := range []struct {
		name      string
		cert, key []byte
		wantOK    bool
	}{
		{name: "no client certificate"},
		{name: "another CA's certificate", cert: otherCert, key: otherKey},
		{name: "the mesh CA's certificate", cert: meshCert, key: meshKey, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := TLSConfig{CAFile: caFile}
			if tc.cert != nil {
				cfg.ClientCertFile = writeFile(t, t.TempDir(), "cert-chain.pem", tc.cert)
				cfg.ClientKeyFile = writeFile(t, t.TempDir(), "key.pem", tc.key)
			}
			ep := tlsEndpoint(t, Target{URL: page.url(), TLSServerName: "vllm.llm.svc"}, testCredentials(t, cfg))
			w := newWorker()
			n, err := w.get(context.Background(), time.Now().Add(waitLimit), ep, 1<<20)
			if tc.wantOK {
				if err != nil || string(w.buf[:n]) != tlsPageBody {
					t.Fatalf("got %q, %v; want the page", w.buf[:n], err)
				}
				return
			}
			if err == nil {
				t.Fatal("served, want refused")
			}
			if ReasonOf(err) != ReasonConnection || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("error %v, want reason connection naming the certificate", err)
			}
		})
	}
}

// TestHostileHandshakes: a target that never answers the handshake, or
// sends a huge certificate chain, costs at most the scrape's deadline,
// and its reason says which.
func TestHostileHandshakes(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "ca")
	caFile := writeFile(t, t.TempDir(), "ca.pem", ca.pem)
	cr := testCredentials(t, TLSConfig{CAFile: caFile})
	if cfg := cr.tlsConfig("x"); cfg.Renegotiation != tls.RenegotiateNever || cfg.MinVersion < tls.VersionTLS12 {
		t.Fatalf("renegotiation %v, minimum version %x; want never and TLS 1.2", cfg.Renegotiation, cfg.MinVersion)
	}

	// A chain of 2,000 copies of a certificate: about 1 MB in one
	// Certificate message.
	leaf, _, _ := ca.issue(t, "p", false, "127.0.0.1")
	huge := leaf
	for range 2000 {
		huge.Certificate = append(huge.Certificate, ca.cert.Raw)
	}

	for _, tc := range []struct {
		name       string
		serve      func(c net.Conn)
		wantReason string
	}{
		{name: "never answers", serve: func(c net.Conn) {
			buf := make([]byte, 1024)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}, wantReason: ReasonTimeout},
		{name: "trickles", serve: func(c net.Conn) {
			// A handshake record of 16 KiB announced, then a byte at a time.
			if _, err := c.Write([]byte{0x16, 0x03, 0x03, 0x40, 0x00}); err != nil {
				return
			}
			for {
				if _, err := c.Write([]byte{0x02}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}, wantReason: ReasonTimeout},
		{name: "huge certificate chain", serve: func(c net.Conn) {
			_ = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{huge}}).Handshake()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			t.Cleanup(func() { _ = l.Close(); wg.Wait() })
			wg.Go(func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					wg.Go(func() {
						defer func() { _ = c.Close() }()
						_ = c.SetDeadline(time.Now().Add(waitLimit))
						tc.serve(c)
					})
				}
			})
			ep := tlsEndpoint(t, Target{URL: "https://" + l.Addr().String() + "/metrics"}, cr)
			const timeout = 500 * time.Millisecond
			start := time.Now()
			_, err = newWorker().get(context.Background(), start.Add(timeout), ep, 1<<20)
			took := time.Since(start)
			if err == nil {
				t.Fatal("handshake succeeded")
			}
			if took > timeout+250*time.Millisecond {
				t.Fatalf("took %v, want at most the deadline (%v)", took, timeout)
			}
			if tc.wantReason != "" && ReasonOf(err) != tc.wantReason {
				t.Fatalf("error %v, want reason %s", err, tc.wantReason)
			}
			if ep.kept() {
				t.Fatal("a failed handshake's connection was kept")
			}
		})
	}
}

// TestTLSConnectionReuse: scrapes over HTTPS keep one connection, and a
// new connection after the server closed the old one resumes the TLS
// session instead of a full handshake.
func TestTLSConnectionReuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	cert, _, _ := ca.issue(t, "p", false, "127.0.0.1")
	page := newTLSPage(t, cert, nil, nil)
	cr := testCredentials(t, TLSConfig{CAFile: writeFile(t, dir, "ca.pem", ca.pem)})
	ep := tlsEndpoint(t, Target{URL: page.url()}, cr)
	w := newWorker()
	for range 5 {
		if err := getOnce(t, w, ep, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if n := page.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 scrapes, want 1", n)
	}
	page.srv.CloseClientConnections()
	for range 2 {
		if err := getOnce(t, w, ep, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	_, resumed := page.seen()
	if n := page.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	if resumed[0] || !resumed[5] || !resumed[6] {
		t.Fatalf("resumed %v: want the first handshake full and the second resumed", resumed)
	}
}

// TestTLSBounds: the body limit and the scrape's deadline hold over HTTPS
// as over plain HTTP, through a Manager.
func TestTLSBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	cert, _, _ := ca.issue(t, "p", false, "127.0.0.1")
	big := strings.Repeat("# filler line\n", 10000)
	large := newTLSPage(t, cert, nil, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(big)) })
	hang := newTLSPage(t, cert, nil, func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	cfg := DefaultConfig()
	cfg.MaxBodySize = 64 << 10
	cfg.Timeout = 300 * time.Millisecond
	cfg.TLS = TLSConfig{CAFile: writeFile(t, dir, "ca.pem", ca.pem)}
	sink := newRecordingSink()
	m, err := NewManager(cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url, reason string
	}{
		{"body too large", large.url(), ReasonBodyTooLarge},
		{"hanging body", hang.url(), ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := types.NamespacedName{Namespace: "ns", Name: tc.name}
			start := time.Now()
			m.ScrapeNow(context.Background(), []Target{{Pod: pod, URL: tc.url}})
			if took := time.Since(start); took > cfg.Timeout+250*time.Millisecond {
				t.Fatalf("took %v, want at most the timeout %v", took, cfg.Timeout)
			}
			recs := sink.get(pod)
			if len(recs) != 1 || ReasonOf(recs[0].err) != tc.reason {
				t.Fatalf("recorded %+v, want one with reason %s", recs, tc.reason)
			}
		})
	}
}

// TestTLSConfigCheck lists every problem of the files at once.
func TestTLSConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	_, certPEM, keyPEM := ca.issue(t, "adapter", true)
	_, _, otherKey := ca.issue(t, "other", true)
	good := TLSConfig{
		CAFile:          writeFile(t, dir, "ca.pem", ca.pem),
		ClientCertFile:  writeFile(t, dir, "tls.crt", certPEM),
		ClientKeyFile:   writeFile(t, dir, "tls.key", keyPEM),
		BearerTokenFile: writeFile(t, dir, "token", []byte("tok")),
	}
	if errs := good.Check(); len(errs) != 0 {
		t.Fatalf("good files: %v", errs)
	}
	for _, tc := range []struct {
		name string
		cfg  TLSConfig
		want []string
	}{
		{"missing files", TLSConfig{CAFile: filepath.Join(dir, "nope.pem"), BearerTokenFile: filepath.Join(dir, "nope")},
			[]string{"scrape CA file: open", "scrape bearer token file: open"}},
		{"cert without key", TLSConfig{ClientCertFile: good.ClientCertFile}, []string{"needs both its certificate file and its key file"}},
		{"key without cert", TLSConfig{ClientKeyFile: good.ClientKeyFile}, []string{"needs both"}},
		{"mismatched pair, empty token, CA without certificates", TLSConfig{
			CAFile:          writeFile(t, dir, "empty.pem", []byte("hello")),
			ClientCertFile:  good.ClientCertFile,
			ClientKeyFile:   writeFile(t, dir, "other.key", otherKey),
			BearerTokenFile: writeFile(t, dir, "empty-token", []byte(" \n")),
		}, []string{"no PEM certificate", "private key does not match public key", "is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.cfg.Check()
			all := ""
			for _, e := range errs {
				all += e.Error() + "\n"
			}
			if len(errs) != len(tc.want) {
				t.Errorf("%d errors, want %d:\n%s", len(errs), len(tc.want), all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("errors\n%s\ndo not contain %q", all, w)
				}
			}
			if _, err := newCredentials(tc.cfg); err == nil {
				t.Error("newCredentials accepted the files")
			}
		})
	}
}

// BenchmarkScrapeTLS compares a GET of the 51.5 KB vLLM page over HTTPS
// on a kept connection (with the bearer token) with the same GET over
// plain HTTP, in one run: the cost TLS adds per scrape once the handshake
// is paid. The loopback servers run in the same process, so the figures
// include their side.
func BenchmarkScrapeTLS(b *testing.B) {
	page := loadFixture(b)
	dir := b.TempDir()
	ca := newTestCA(b, "ca")
	cert, _, _ := ca.issue(b, "p", false, "127.0.0.1")
	serve := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page) })
	plain := httptest.NewServer(serve)
	b.Cleanup(plain.Close)
	secure := newTLSPage(b, cert, nil, serve)
	cr := testCredentials(b, TLSConfig{CAFile: writeFile(b, dir, "ca.pem", ca.pem), BearerTokenFile: writeFile(b, dir, "token", []byte("tok"))})
	for _, bc := range []struct {
		name   string
		target Target
	}{
		{"http", Target{URL: plain.URL + "/metrics"}},
		{"https-kept", Target{URL: secure.url(), Auth: AuthBearer}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ep := tlsEndpoint(b, bc.target, cr)
			w := newWorker()
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				if _, err := w.get(context.Background(), time.Now().Add(waitLimit), ep, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
