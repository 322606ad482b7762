// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// TLSConfig says how HTTPS targets are verified and which credentials the
// scraper presents. The zero value verifies HTTPS targets against the
// system's roots and presents no credential.
type TLSConfig struct {
	// CAFile is a PEM bundle of the CAs HTTPS targets' certificates must
	// chain to (--scrape-ca-file); empty means the system's roots. It is
	// re-read when it changes (see ReloadCheck).
	CAFile string
	// InsecureSkipVerify accepts any certificate from an HTTPS target
	// (--scrape-insecure-skip-verify): encryption without authentication.
	// The bearer token is never sent then (a target that asks for it
	// fails), since anyone on the path could read it.
	InsecureSkipVerify bool
	// ClientCertFile and ClientKeyFile are a PEM certificate and key
	// presented to HTTPS targets that ask for one (mTLS), reloaded when
	// either changes. Both or neither.
	ClientCertFile string
	ClientKeyFile  string
	// BearerTokenFile holds the token sent as "Authorization: Bearer" to
	// HTTPS targets of Auth AuthBearer, re-read when it changes (the
	// projected service-account token rotates).
	BearerTokenFile string
	// TokenToHostNetwork allows the token to go to host-network pods,
	// which share their node's address with every other host-network
	// process there. Off: a host-network target that asks for the token
	// fails.
	TokenToHostNetwork bool
	// ReloadCheck is the least time between two looks (a stat) at each
	// file for a change; 0 means DefaultReloadCheck. A handshake that
	// fails verification looks again at once, at most once a second.
	ReloadCheck time.Duration
}

// DefaultReloadCheck is how often the CA, client certificate and token
// files are looked at for a change, at most.
const DefaultReloadCheck = 5 * time.Second

// sessionCacheSize bounds the TLS sessions kept for resumption: one per
// HTTPS target's server name, least recently used dropped first.
const sessionCacheSize = 1024

// maxCredentialFile bounds what is read of a CA bundle, certificate, key or
// token file.
const maxCredentialFile = 4 << 20

// Auth is the credential a target asks for.
type Auth uint8

const (
	// AuthNone: no credential beyond the client certificate, which any
	// HTTPS target that asks for one gets.
	AuthNone Auth = iota
	// AuthBearer: the bearer token, over HTTPS only.
	AuthBearer
)

func (a Auth) String() string {
	if a == AuthBearer {
		return "bearer"
	}
	return "none"
}

// Check loads every file c names once and reports every problem at once:
// unreadable files, a CA file without a certificate, a certificate without
// its key (or the other way round), a key that does not match, an empty
// token.
func (c TLSConfig) Check() []error {
	var errs []error
	if c.CAFile != "" {
		if _, err := loadCAFile(c.CAFile); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case (c.ClientCertFile == "") != (c.ClientKeyFile == ""):
		errs = append(errs, errors.New("a client certificate needs both its certificate file and its key file"))
	case c.ClientCertFile != "":
		if _, err := loadKeyPair(c.ClientCertFile, c.ClientKeyFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BearerTokenFile != "" {
		if _, err := loadToken(c.BearerTokenFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ReloadCheck < 0 {
		errs = append(errs, fmt.Errorf("reload check interval must not be negative, got %v", c.ReloadCheck))
	}
	return errs
}

// readBounded reads a credential file of at most maxCredentialFile bytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxCredentialFile {
		return nil, fmt.Errorf("%s: more than %d bytes", path, maxCredentialFile)
	}
	return data, nil
}

func loadCAFile(path string) (*x509.CertPool, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("scrape CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("scrape CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}

func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := readBounded(certFile)
	if err != nil {
		return nil, fmt.Errorf("scrape client certificate: %w", err)
	}
	key, err := readBounded(keyFile)
	if err != nil {
		return nil, fmt.Errorf("scrape client key: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("scrape client certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &pair, nil
}

// loadToken reads a bearer token: its surrounding white space trimmed; a
// token that is empty or holds a control character or a space (it goes
// into a header line) is refused.
func loadToken(path string) ([]byte, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("scrape bearer token file: %w", err)
	}
	tok := bytes.TrimSpace(data)
	if len(tok) == 0 {
		return nil, fmt.Errorf("scrape bearer token file %s is empty", path)
	}
	for _, b := range tok {
		if b <= ' ' || b >= 0x7f {
			return nil, fmt.Errorf("scrape bearer token file %s: the token holds a space, a control character or a non-ASCII byte", path)
		}
	}
	return tok, nil
}

// watched is a value loaded from one or more files, loaded again when one
// of them changes (its modification time or size), looked at no more often
// than every.
type watched[T any] struct {
	what  string
	paths []string
	load  func() (*T, error)
	every time.Duration
	// reloaded, when set, is called after a new value is stored.
	reloaded func()

	val       atomic.Pointer[T]
	nextCheck atomic.Int64 // unix nanoseconds: no look before
	mu        sync.Mutex   // one look at a time
	stamps    []fileStamp
	lastForce time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// newWatched loads the value once; an error is the caller's to report.
func newWatched[T any](what string, every time.Duration, load func() (*T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{what: what, paths: paths, load: load, every: every}
	w.stamps = w.stat()
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.val.Store(v)
	w.nextCheck.Store(time.Now().Add(every).UnixNano())
	return w, nil
}

func (w *watched[T]) stat() []fileStamp {
	out := make([]fileStamp, len(w.paths))
	for i, p := range w.paths {
		if fi, err := os.Stat(p); err == nil {
			out[i] = fileStamp{fi.ModTime(), fi.Size()}
		}
	}
	return out
}

// get returns the current value, looking at the files first when the last
// look is older than every.
func (w *watched[T]) get(now time.Time) *T {
	if now.UnixNano() >= w.nextCheck.Load() {
		w.check(now, false)
	}
	return w.val.Load()
}

// check looks at the files and loads the value again when one changed. A
// forced check (after a failed handshake) runs at most once a second.
func (w *watched[T]) check(now time.Time, force bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if force {
		if now.Sub(w.lastForce) < time.Second {
			return
		}
		w.lastForce = now
	} else if now.UnixNano() < w.nextCheck.Load() {
		return // another caller just looked
	}
	w.nextCheck.Store(now.Add(w.every).UnixNano())
	stamps := w.stat()
	changed := false
	for i := range stamps {
		if !stamps[i].mod.Equal(w.stamps[i].mod) || stamps[i].size != w.stamps[i].size {
			changed = true
		}
	}
	if !changed {
		return
	}
	w.stamps = stamps
	v, err := w.load()
	if err != nil {
		klog.ErrorS(err, "Keeping the previous scrape credential: the changed file could not be loaded", "credential", w.what)
		return
	}
	w.val.Store(v)
	if w.reloaded != nil {
		w.reloaded()
	}
	klog.InfoS("Reloaded a scrape credential", "credential", w.what, "files", w.paths)
}

// credentials are the scraper's TLS settings and credentials, shared by
// every endpoint of a Manager.
type credentials struct {
	cfg TLSConfig
	// sessions is the TLS session cache, replaced by a new one when the CA
	// bundle or the client certificate changes: a session resumed skips
	// both the chain's verification and the client certificate, so one
	// from before the change would carry the old trust or identity.
	sessions atomic.Pointer[sessionCache]
	ca       *watched[x509.CertPool]   // nil: the system's roots
	cert     *watched[tls.Certificate] // nil: no client certificate
	token    *watched[[]byte]          // nil: no token
	base     atomic.Pointer[baseTLS]   // the tls.Config for the current CA pool
	now      func() time.Time          // time.Now; tests replace it
}

type sessionCache struct{ tls.ClientSessionCache }

// baseTLS is the shared tls.Config built for one CA pool and session cache.
type baseTLS struct {
	pool     *x509.CertPool
	sessions *sessionCache
	cfg      *tls.Config
}

// newSessions starts an empty session cache.
func (cr *credentials) newSessions() {
	cr.sessions.Store(&sessionCache{tls.NewLRUClientSessionCache(sessionCacheSize)})
}

var errNoClientCert = errors.New("no client certificate configured")

// newCredentials loads c's files; an error names each file that failed.
func newCredentials(c TLSConfig) (*credentials, error) {
	every := c.ReloadCheck
	if every <= 0 {
		every = DefaultReloadCheck
	}
	cr := &credentials{cfg: c, now: time.Now}
	cr.newSessions()
	var errs []error
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("a client certificate needs both its certificate file and its key file"))
	}
	var err error
	if c.CAFile != "" {
		if cr.ca, err = newWatched("CA bundle", every, func() (*x509.CertPool, error) { return loadCAFile(c.CAFile) }, c.CAFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ClientCertFile != "" && c.ClientKeyFile != "" {
		if cr.cert, err = newWatched("client certificate", every, func() (*tls.Certificate, error) {
			return loadKeyPair(c.ClientCertFile, c.ClientKeyFile)
		}, c.ClientCertFile, c.ClientKeyFile); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BearerTokenFile != "" {
		if cr.token, err = newWatched("bearer token", every, func() (*[]byte, error) {
			t, err := loadToken(c.BearerTokenFile)
			return &t, err
		}, c.BearerTokenFile); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cr.ca != nil {
		cr.ca.reloaded = cr.newSessions
	}
	if cr.cert != nil {
		cr.cert.reloaded = cr.newSessions
	}
	if c.InsecureSkipVerify {
		klog.Warning("HTTPS targets' certificates are not verified (--scrape-insecure-skip-verify): their pages are encrypted, not authenticated, and the bearer token is never sent")
	}
	return cr, nil
}

// tlsConfig returns the client configuration of a handshake with serverName.
func (cr *credentials) tlsConfig(serverName string) *tls.Config {
	now := cr.now()
	var pool *x509.CertPool
	if cr.ca != nil {
		pool = cr.ca.get(now)
	}
	if cr.cert != nil {
		cr.cert.get(now) // a new certificate starts new sessions
	}
	sessions := cr.sessions.Load()
	b := cr.base.Load()
	if b == nil || b.pool != pool || b.sessions != sessions {
		cfg := &tls.Config{
			RootCAs:            pool,
			MinVersion:         tls.VersionTLS12,
			Renegotiation:      tls.RenegotiateNever,
			ClientSessionCache: sessions,
			InsecureSkipVerify: cr.cfg.InsecureSkipVerify, //nolint:gosec // an explicit opt-in, warned about at start
		}
		if cr.cert != nil {
			cfg.GetClientCertificate = cr.clientCertificate
		}
		b = &baseTLS{pool: pool, sessions: sessions, cfg: cfg}
		cr.base.Store(b)
	}
	cfg := b.cfg.Clone()
	cfg.ServerName = serverName
	return cfg
}

// clientCertificate is the tls.Config's GetClientCertificate: the current
// certificate, whatever the server asks for (the server says whether it
// accepts it).
func (cr *credentials) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := cr.cert.get(cr.now()); c != nil {
		return c, nil
	}
	return nil, errNoClientCert
}

// bearer returns the current token, nil when none is configured.
func (cr *credentials) bearer() []byte {
	if cr.token == nil {
		return nil
	}
	return *cr.token.get(cr.now())
}

// handshakeFailed looks at the CA and certificate files again (at most
// once a second): a rotated CA or certificate may be why.
func (cr *credentials) handshakeFailed() {
	now := cr.now()
	if cr.ca != nil {
		cr.ca.check(now, true)
	}
	if cr.cert != nil {
		cr.cert.check(now, true)
	}
}
