// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate and its key as PEM files.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// TestScrapeTLSFlags: the HTTPS scraping flags reach the scraper's config,
// and every problem with them is listed at once.
func TestScrapeTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, _ := selfSigned(t, dir, "ca")
	cert, key := selfSigned(t, dir, "client")
	_, otherKey := selfSigned(t, dir, "other")
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serverConfig := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(serverConfig, []byte("servers:\n  - name: secure\n    scheme: https\n    auth: bearer\n    queue: {series: q}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr []string
	}{
		{name: "none"},
		{name: "all", args: []string{"--scrape-ca-file=" + ca, "--scrape-bearer-token-file=" + token, "--scrape-token-to-host-network",
			"--scrape-client-cert-file=" + cert, "--scrape-client-key-file=" + key, "--server-config=" + serverConfig}},
		{name: "insecure alone", args: []string{"--scrape-insecure-skip-verify"}},
		{name: "cert without key", args: []string{"--scrape-client-cert-file=" + cert}, wantErr: []string{"--scrape-client-cert-file needs --scrape-client-key-file"}},
		{name: "key without cert", args: []string{"--scrape-client-key-file=" + key}, wantErr: []string{"--scrape-client-key-file needs --scrape-client-cert-file"}},
		{name: "every unreadable file listed", args: []string{"--scrape-ca-file=" + missing, "--scrape-bearer-token-file=" + missing + "-token",
			"--scrape-client-cert-file=" + cert, "--scrape-client-key-file=" + otherKey},
			wantErr: []string{"--scrape-ca-file: scrape CA file: open", "--scrape-bearer-token-file: scrape bearer token file: open", "--scrape-client-cert-file, --scrape-client-key-file: ", "does not match"}},
		{name: "CA file not PEM", args: []string{"--scrape-ca-file=" + token}, wantErr: []string{"no PEM certificate"}},
		{name: "insecure with a CA", args: []string{"--scrape-insecure-skip-verify", "--scrape-ca-file=" + ca}, wantErr: []string{"cannot go with --scrape-ca-file"}},
		{name: "host network without a token", args: []string{"--scrape-token-to-host-network"}, wantErr: []string{"needs --scrape-bearer-token-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, fs := parsed(t, tc.args)
			o.Complete(fs)
			err := o.Validate()
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Validate() = nil, want errors %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cfg.Scrape.TLS, o.ScrapeTLS.config(); got != want {
				t.Errorf("scrape TLS config %+v, want %+v", got, want)
			}
			if tc.name == "all" {
				if cfg.Scrape.TLS.CAFile != ca || cfg.Scrape.TLS.BearerTokenFile != token || !cfg.Scrape.TLS.TokenToHostNetwork || cfg.Scrape.TLS.ClientKeyFile != key {
					t.Errorf("scrape TLS config %+v does not hold the flags", cfg.Scrape.TLS)
				}
				if s := cfg.ServerScrape["secure"]; s.Scheme != "https" || s.Auth != "bearer" {
					t.Errorf("server config's scrape settings %+v, want https and bearer", cfg.ServerScrape)
				}
			}
		})
	}
}
