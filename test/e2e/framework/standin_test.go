// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reviewer is a fake control plane for the stand-in's reviews: token
// "alice" and "bob" authenticate as those users, and only alice may get
// /metrics.
func reviewer() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tok := tr.Spec.Token; tok == "alice" || tok == "bob" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tok}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && na != nil && na.Path == "/metrics" && na.Verb == "get"
		return true, sar, nil
	})
	return c
}

// TestMetricsStandIn: the stand-in serves its page only to the clients its
// configuration admits, answers the others as kube-rbac-proxy or a
// STRICT mTLS server would, and records every Authorization header.
func TestMetricsStandIn(t *testing.T) {
	page := []byte("vllm:num_requests_waiting{model_name=\"m\"} 3\n")
	ca, err := NewCA("stand-in-ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(CertSpec{CommonName: "pod", DNSNames: []string{PodDNSName("127.0.0.1", "llm")}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca *CA) *KeyPair {
		kp, err := ca.Issue(CertSpec{CommonName: "adapter", Client: true})
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	good, bad := client(ca), client(other)

	for _, tc := range []struct {
		name       string
		cfg        StandInConfig
		clientCert *KeyPair
		auth       string
		wantStatus int // 0: the handshake fails
		wantAuths  []string
	}{
		{name: "plain http records the header", auth: "Bearer x", wantStatus: 200, wantAuths: []string{"Bearer x"}},
		{name: "tls", cfg: StandInConfig{Cert: serving}, wantStatus: 200},
		{name: "mtls without a client certificate", cfg: StandInConfig{Cert: serving, ClientCA: ca}},
		{name: "mtls with another CA's certificate", cfg: StandInConfig{Cert: serving, ClientCA: ca}, clientCert: bad},
		{name: "mtls with the CA's certificate", cfg: StandInConfig{Cert: serving, ClientCA: ca}, clientCert: good, wantStatus: 200},
		{name: "review without a token", cfg: StandInConfig{Reviewer: reviewer()}, wantStatus: 401},
		{name: "review of an unknown token", cfg: StandInConfig{Reviewer: reviewer()}, auth: "Bearer mallory", wantStatus: 401, wantAuths: []string{"Bearer mallory"}},
		{name: "review of a user without the right", cfg: StandInConfig{Reviewer: reviewer()}, auth: "Bearer bob", wantStatus: 403, wantAuths: []string{"Bearer bob"}},
		{name: "review of a user with the right", cfg: StandInConfig{Reviewer: reviewer()}, auth: "Bearer alice", wantStatus: 200, wantAuths: []string{"Bearer alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Addr, cfg.Page = "127.0.0.1:0", page
			s, err := StartMetricsStandIn(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			tlsCfg := &tls.Config{RootCAs: pool, ServerName: PodDNSName("127.0.0.1", "llm"), MinVersion: tls.VersionTLS12}
			if tc.clientCert != nil {
				pair, err := tls.X509KeyPair(tc.clientCert.CertPEM, tc.clientCert.KeyPEM)
				if err != nil {
					t.Fatal(err)
				}
				tlsCfg.Certificates = []tls.Certificate{pair}
			}
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
			req, err := http.NewRequest(http.MethodGet, s.Scheme()+"://"+s.Addr()+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := hc.Do(req)
			if tc.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("served %d, want the handshake refused", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantStatus)
			}
			if tc.wantStatus == 200 && string(body) != string(page) {
				t.Fatalf("body %q, want the page", body)
			}
			if got := s.Authorizations(); !reflect.DeepEqual(got, tc.wantAuths) {
				t.Errorf("Authorization headers %q, want %q", got, tc.wantAuths)
			}
			if got := s.Answers(); got[tc.wantStatus] != 1 {
				t.Errorf("answers %v, want one %d", got, tc.wantStatus)
			}
		})
	}
}
