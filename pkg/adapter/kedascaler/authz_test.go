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
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
)

// issueClient makes a client certificate signed by ca whose subject names
// user cn in groups orgs.
func issueClient(t *testing.T, cn string, orgs []string, ca *keyPair) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// fakeReviewer stands in for the API server's delegated authorizer (a
// SubjectAccessReview): it allows what allow says and records what it was
// asked.
type fakeReviewer struct {
	allow func(a authorizer.Attributes) bool
	err   error

	mu    sync.Mutex
	asked []authorizer.Attributes
}

func (f *fakeReviewer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, a)
	f.mu.Unlock()
	if f.err != nil {
		return authorizer.DecisionNoOpinion, "", f.err
	}
	if f.allow(a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

func (f *fakeReviewer) questions() []authorizer.Attributes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// tlsScaler serves the fleet with access on 127.0.0.1 over TLS, with
// client certificates of ca required when clientCA, and returns a function
// that dials it as KEDA does, with the client certificate cert (none when
// nil).
func tlsScaler(t *testing.T, access kedascaler.Access, ca *keyPair, clientCA bool) func(cert *tls.Certificate) pb.ExternalScalerClient {
	t.Helper()
	caFile := ""
	if clientCA {
		caFile = filepath.Join(t.TempDir(), "client-ca.crt")
		if err := os.WriteFile(caFile, ca.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certs := &staticCerts{}
	certs.set(issue(t, "scaler", ca, false, true))
	tlsCfg, err := kedascaler.ServerTLS(certs, caFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := listenAndServe(t, tlsCfg, fleetScalerWith(t, kedascaler.Config{StreamInterval: time.Second, Access: access}), prometheus.NewRegistry())
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	return func(cert *tls.Certificate) pb.ExternalScalerClient {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return pb.NewExternalScalerClient(conn)
	}
}

// Over real TLS with KEDA's generated client: a caller is allowed only the
// namespaces a grant gives its certificate's user (CN) or groups (O), or
// that the reviewer (a SubjectAccessReview) allows it; any other namespace
// is PermissionDenied, with no value, on every method.
func TestCallerReadsOnlyItsAllowedNamespaces(t *testing.T) {
	ca := issue(t, "test-ca", nil, true, false)
	mustGrant := func(s string) kedascaler.Grant {
		g, err := kedascaler.ParseGrant(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	reviewer := &fakeReviewer{allow: func(a authorizer.Attributes) bool {
		return a.GetUser().GetName() == "reviewed" && a.GetNamespace() == "team-b"
	}}
	dial := tlsScaler(t, kedascaler.Access{
		Grants:   []kedascaler.Grant{mustGrant("user:keda-operator=*"), mustGrant("user:team-a-scaler=team-a"), mustGrant("group:b-scalers=team-b")},
		Reviewer: reviewer,
	}, ca, true)

	keda := issueClient(t, "keda-operator", nil, ca)
	teamA := issueClient(t, "team-a-scaler", nil, ca)
	inB := issueClient(t, "someone", []string{"b-scalers"}, ca)
	reviewed := issueClient(t, "reviewed", []string{"reviewers"}, ca)
	stranger := issueClient(t, "stranger", nil, ca)
	tests := []struct {
		name   string
		cert   *tls.Certificate
		ns     string
		want   codes.Code
		wantV  float64
		review bool // the reviewer was asked
	}{
		{name: "all-namespaces grant reads team-a", cert: &keda, ns: "team-a", want: codes.OK, wantV: 7},
		{name: "all-namespaces grant reads team-b", cert: &keda, ns: "team-b", want: codes.OK, wantV: 9},
		{name: "team-a grant reads team-a", cert: &teamA, ns: "team-a", want: codes.OK, wantV: 7},
		{name: "team-a grant cannot read team-b", cert: &teamA, ns: "team-b", want: codes.PermissionDenied, review: true},
		{name: "group grant reads team-b", cert: &inB, ns: "team-b", want: codes.OK, wantV: 9},
		{name: "group grant cannot read team-a", cert: &inB, ns: "team-a", want: codes.PermissionDenied, review: true},
		{name: "reviewer allows team-b", cert: &reviewed, ns: "team-b", want: codes.OK, wantV: 9, review: true},
		{name: "reviewer refuses team-a", cert: &reviewed, ns: "team-a", want: codes.PermissionDenied, review: true},
		{name: "no grant", cert: &stranger, ns: "team-a", want: codes.PermissionDenied, review: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before := len(reviewer.questions())
			c := dial(tt.cert)
			r := ref(tt.ns, md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"))
			got, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r})
			_, aerr := c.IsActive(ctx, r)
			_, serr := c.GetMetricSpec(ctx, r)
			stream, err4 := c.StreamIsActive(ctx, r)
			if err4 == nil {
				_, err4 = stream.Recv()
			}
			for i, err := range []error{err, aerr, serr, err4} {
				if status.Code(err) != tt.want {
					t.Errorf("call %d: got %v, want %s", i, err, tt.want)
				}
			}
			if tt.want == codes.OK && (got == nil || got.MetricValues[0].MetricValueFloat != tt.wantV) {
				t.Errorf("got %v, want %v", got, tt.wantV)
			}
			if tt.want != codes.OK && got != nil {
				t.Errorf("a refused call got a value: %v", got)
			}
			if asked := len(reviewer.questions()) > before; asked != tt.review {
				t.Errorf("reviewer asked %v, want %v", asked, tt.review)
			}
		})
	}

	// The reviewer is asked the question the custom metrics API would
	// authorize: a get of the metric of the Deployment in the namespace,
	// by the certificate's user and groups, authenticated.
	qs := reviewer.questions()
	if len(qs) == 0 {
		t.Fatal("the reviewer was never asked")
	}
	var found bool
	for _, a := range qs {
		if a.GetUser().GetName() != "reviewed" {
			continue
		}
		found = true
		if a.GetVerb() != "get" || a.GetAPIGroup() != "custom.metrics.k8s.io" || a.GetResource() != "deployments.apps" || a.GetName() != "llm" ||
			a.GetSubresource() != "inference_queue_size" || !a.IsResourceRequest() ||
			!slices.Equal(a.GetUser().GetGroups(), []string{"reviewers", "system:authenticated"}) {
			t.Errorf("reviewer asked %+v", a)
		}
	}
	if !found {
		t.Error("the reviewer was never asked about user reviewed")
	}
}

// Without a client CA the port asks for no certificate, so its callers
// have no identity: they are refused unless the operator opted out with
// AllowUnauthenticated. A reviewer that fails does not allow.
func TestCallerWithoutIdentity(t *testing.T) {
	ca := issue(t, "test-ca", nil, true, false)
	tests := []struct {
		name   string
		access kedascaler.Access
		want   codes.Code
	}{
		{name: "refused by default", access: kedascaler.Access{}, want: codes.Unauthenticated},
		{name: "refused with grants", access: kedascaler.Access{Grants: []kedascaler.Grant{{Name: "", Namespaces: []string{"*"}}}}, want: codes.Unauthenticated},
		{name: "allowed when opted out", access: kedascaler.Access{AllowUnauthenticated: true}, want: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := tlsScaler(t, tt.access, ca, false)(nil)
			_, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"))})
			if status.Code(err) != tt.want {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
	t.Run("reviewer error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cert := issueClient(t, "someone", nil, ca)
		c := tlsScaler(t, kedascaler.Access{Reviewer: &fakeReviewer{err: errors.New("kube-apiserver unreachable")}}, ca, true)(&cert)
		_, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"))})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("got %v, want Unavailable", err)
		}
	})
}

func TestParseGrant(t *testing.T) {
	tests := []struct {
		in      string
		want    kedascaler.Grant
		wantErr bool
	}{
		{in: "user:keda-operator=*", want: kedascaler.Grant{Name: "keda-operator", Namespaces: []string{"*"}}},
		{in: "group:team-a=team-a,team-a-dev", want: kedascaler.Grant{Group: true, Name: "team-a", Namespaces: []string{"team-a", "team-a-dev"}}},
		{in: "user:a=b=team-a", want: kedascaler.Grant{Name: "a=b", Namespaces: []string{"team-a"}}},
		{in: "keda-operator=*", wantErr: true},
		{in: "role:x=*", wantErr: true},
		{in: "user:=team-a", wantErr: true},
		{in: "user:x", wantErr: true},
		{in: "user:x=", wantErr: true},
		{in: "user:x=Team_A", wantErr: true},
		{in: "user:x=team-a,", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := kedascaler.ParseGrant(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got %v, %v; want error %v", got, err, tt.wantErr)
			}
			if err == nil && (got.Group != tt.want.Group || got.Name != tt.want.Name || !slices.Equal(got.Namespaces, tt.want.Namespaces) || got.String() != tt.in) {
				t.Errorf("got %+v (%s), want %+v", got, got, tt.want)
			}
		})
	}
}

// A StreamIsActive stream is authorized again at every read: a caller the
// reviewer stops allowing (a RoleBinding removed) sees its stream end with
// PermissionDenied instead of being pushed values for ever.
func TestStreamEndsWhenTheCallerIsNoLongerAllowed(t *testing.T) {
	ca := issue(t, "test-ca", nil, true, false)
	var mu sync.Mutex
	allowed := true
	reviewer := &fakeReviewer{allow: func(authorizer.Attributes) bool {
		mu.Lock()
		defer mu.Unlock()
		return allowed
	}}
	cert := issueClient(t, "team-a-scaler", nil, ca)
	c := tlsScaler(t, kedascaler.Access{Reviewer: reviewer}, ca, true)(&cert)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := c.StreamIsActive(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm")))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := stream.Recv(); err != nil || !got.Result {
		t.Fatalf("first push %v, %v; want active", got, err)
	}
	mu.Lock()
	allowed = false
	mu.Unlock()
	// The value does not change, so nothing more is pushed: the stream ends
	// at the next read (the fleet's stream interval is a second).
	if _, err := stream.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("after the reviewer stopped allowing: %v, want PermissionDenied", err)
	}
}
