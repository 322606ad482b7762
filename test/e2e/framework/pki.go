// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that lives for one test run.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// KeyPair is a certificate and its private key, PEM encoded, and the files
// they were written to.
type KeyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// CertSpec says what a leaf certificate is for.
type CertSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool // server auth usage
	Client       bool // client auth usage
}

// NewCA creates a self-signed CA valid for a day.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate %q: %w", commonName, err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a leaf certificate for spec.
func (ca *CA) Issue(spec CertSpec) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %q: %w", spec.CommonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	var usage []x509.ExtKeyUsage
	if spec.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("create certificate %q: %w", spec.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key for %q: %w", spec.CommonName, err)
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Write stores the pair as dir/name.crt and dir/name.key and records the paths.
func (kp *KeyPair) Write(dir, name string) error {
	kp.CertFile = filepath.Join(dir, name+".crt")
	kp.KeyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(kp.CertFile, kp.CertPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", kp.CertFile, err)
	}
	if err := os.WriteFile(kp.KeyFile, kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", kp.KeyFile, err)
	}
	return nil
}

// WriteCA stores the CA certificate as dir/name.crt and returns the path.
func (ca *CA) WriteCA(dir, name string) (string, error) {
	p := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(p, ca.CertPEM, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// NewServiceAccountKey writes an RSA key pair for signing service account
// tokens (private key PKCS#1 PEM, public key PKIX PEM) and returns the paths.
func NewServiceAccountKey(dir string) (privFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("marshal service account public key: %w", err)
	}
	privFile = filepath.Join(dir, "sa.key")
	pubFile = filepath.Join(dir, "sa.pub")
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(privFile, priv, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", privFile, err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", pubFile, err)
	}
	return privFile, pubFile, nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}
