// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
)

// The certificates the harness makes must verify the way the aggregator,
// client-go and the adapter verify them.
func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(CertSpec{CommonName: "svc", DNSNames: []string{"adapter.custom-metrics.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(CertSpec{CommonName: "e2e-admin", Organization: []string{"system:masters"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		kp      *KeyPair
		roots   *CA
		dns     string
		usage   x509.ExtKeyUsage
		wantErr bool
	}{
		{"serving cert for the service name", serving, ca, "adapter.custom-metrics.svc", x509.ExtKeyUsageServerAuth, false},
		{"serving cert for 127.0.0.1", serving, ca, "127.0.0.1", x509.ExtKeyUsageServerAuth, false},
		{"serving cert for another name", serving, ca, "other.custom-metrics.svc", x509.ExtKeyUsageServerAuth, true},
		{"serving cert against another CA", serving, other, "adapter.custom-metrics.svc", x509.ExtKeyUsageServerAuth, true},
		{"client cert as a client", client, ca, "", x509.ExtKeyUsageClientAuth, false},
		{"client cert as a server", client, ca, "", x509.ExtKeyUsageServerAuth, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tls.X509KeyPair(tc.kp.CertPEM, tc.kp.KeyPEM); err != nil {
				t.Fatalf("key pair does not load: %v", err)
			}
			block, _ := pem.Decode(tc.kp.CertPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(tc.roots.Cert)
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.dns, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("verify: err=%v, want error: %v", err, tc.wantErr)
			}
		})
	}
}
