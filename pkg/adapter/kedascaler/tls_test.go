// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler_test

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
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
)

type keyPair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// issue makes a certificate signed by parent (self-signed when nil).
func issue(t *testing.T, cn string, parent *keyPair, isCA, server bool) *keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else if !isCA {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &keyPair{cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
}

// staticCerts is a CertKeySource whose content a test can replace.
type staticCerts struct {
	mu        sync.Mutex
	cert, key []byte
}

func (s *staticCerts) set(kp *keyPair) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert, s.key = kp.certPEM, kp.keyPEM
}

func (s *staticCerts) CurrentCertKeyContent() ([]byte, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.key
}

// TestTLS: the scaler's port serves the certificate the source holds now
// (a renewal is picked up without a restart) and, with a client CA,
// refuses clients without a certificate it signed. KEDA's generated client
// calls over TLS as KEDA does with caCert, tlsClientCert and tlsClientKey.
func TestTLS(t *testing.T) {
	ca := issue(t, "test-ca", nil, true, false)
	otherCA := issue(t, "other-ca", nil, true, false)
	serving := issue(t, "scaler", ca, false, true)
	client := issue(t, "keda", ca, false, false)
	stranger := issue(t, "stranger", otherCA, false, false)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certs := &staticCerts{}
	certs.set(serving)
	tlsCfg, err := kedascaler.ServerTLS(certs, caFile)
	if err != nil {
		t.Fatal(err)
	}
	keda, err := kedascaler.ParseGrant("user:keda=*")
	if err != nil {
		t.Fatal(err)
	}
	e := fleetScalerWith(t, kedascaler.Config{StreamInterval: time.Second, Access: kedascaler.Access{Grants: []kedascaler.Grant{keda}}})
	srv := listenAndServe(t, tlsCfg, e, prometheus.NewRegistry())

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	call := func(clientCert *keyPair) error {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if clientCert != nil {
			kp, err := tls.X509KeyPair(clientCert.certPEM, clientCert.keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{kp}
		}
		conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_, err = pb.NewExternalScalerClient(conn).GetMetricSpec(cctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm")))
		return err
	}
	if err := call(client); err != nil {
		t.Errorf("client with a certificate of the client CA: %v", err)
	}
	for name, c := range map[string]*keyPair{"no client certificate": nil, "certificate of another CA": stranger} {
		if err := call(c); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: got %v, want the handshake refused (Unavailable)", name, err)
		}
	}
	// A renewed serving certificate from another CA is served at the next
	// handshake: a client trusting only the first CA now refuses it.
	certs.set(issue(t, "scaler", otherCA, false, true))
	if err := call(client); status.Code(err) != codes.Unavailable {
		t.Errorf("after renewal by another CA: got %v, want the client to refuse the new certificate", err)
	}
}

func TestServerTLSErrors(t *testing.T) {
	ca := issue(t, "test-ca", nil, true, false)
	serving := issue(t, "scaler", ca, false, true)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := &staticCerts{}
	good.set(serving)
	tests := []struct {
		name   string
		certs  *staticCerts
		caFile string
	}{
		{name: "no certificate", certs: &staticCerts{}},
		{name: "missing client CA file", certs: good, caFile: filepath.Join(dir, "missing.pem")},
		{name: "client CA file without PEM", certs: good, caFile: notPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := kedascaler.ServerTLS(tt.certs, tt.caFile); err == nil {
				t.Error("got no error")
			}
		})
	}
}
