// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestKEDAExternalScaler: an adapter started with --keda-scaler-address on
// loopback, --keda-scaler-client-ca-file and grants (the documented secure
// set-up), answers KEDA's own generated client (externalscaler.proto, from
// KEDA's module) over TLS with its serving certificate and a client
// certificate whose CN is keda-operator, for a ScaledObject whose trigger
// names a simulated vLLM Deployment: the spec, the idle value 0 (measured)
// and inactive, the queue under load (the value the custom metrics API
// serves for the Deployment) and active, a push to StreamIsActive when the
// load ends, NotFound (never 0) once the Deployment has no pods, and
// nothing across namespaces. Callers without a certificate of the client
// CA are refused at the handshake, one without a CN is Unauthenticated,
// and a tenant granted its own namespace gets PermissionDenied for another
// in all four calls. KEDA's operator itself is not built here (docs/keda.md
// says why).
func TestKEDAExternalScaler(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	other := e.Namespace(t)
	// As docs/keda.md sets the port up: client certificates of a CA of its
	// own, KEDA's operator (CN keda-operator) granted every namespace, and
	// a tenant's certificate granted only its own namespace.
	k := startKEDAAdapter(t, e, framework.AdapterService+"-keda", "user:keda-operator=*", "user:tenant="+other)
	client := k.caller(t, "keda-operator")
	d := simDeployment("llm", 1, "--max-num-seqs=4")
	createSimDeployment(t, e, ns, d, 1)

	ref := &pb.ScaledObjectRef{Name: "llm", Namespace: ns, ScalerMetadata: map[string]string{
		"scalerAddress":         "inference-metrics-adapter.custom-metrics.svc:9443",
		"enableTLS":             "true",
		"metricName":            metricQueue,
		"targetValue":           "5",
		"activationTargetValue": "0",
		"deployment":            d.Name,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	spec, err := client.GetMetricSpec(ctx, ref)
	if err != nil {
		t.Fatalf("GetMetricSpec: %v", err)
	}
	if len(spec.MetricSpecs) != 1 || spec.MetricSpecs[0].MetricName != metricQueue || spec.MetricSpecs[0].TargetSizeFloat != 5 {
		t.Fatalf("GetMetricSpec = %v, want %s with target 5", spec, metricQueue)
	}

	// Who may ask: a certificate of the port's client CA, whose CN a grant
	// allows the ScaledObject's namespace. Without a certificate, or with
	// one of another CA (the same CN), the TLS handshake itself is refused:
	// Unavailable, where KEDA's operator was just answered on the same port.
	// (Its text varies: with TLS 1.3 the client may see the server's alert,
	// "certificate required", or only the connection closed under its
	// first write.)
	stranger, err := framework.NewCA("e2e-stranger-ca")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := stranger.Issue(framework.CertSpec{CommonName: "keda-operator", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	forgedCert, err := tls.X509KeyPair(forged.CertPEM, forged.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]pb.ExternalScalerClient{"no client certificate": k.dial(t, nil), "a certificate of another CA": k.dial(t, &forgedCert)} {
		_, err := c.GetMetricSpec(ctx, ref)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("a caller with %s: GetMetricSpec = %v, want the handshake refused (Unavailable)", name, err)
		} else {
			t.Logf("a caller with %s: %v", name, err)
		}
	}
	// A certificate of the client CA without a CN names no user.
	wantCode(t, "a certificate without a CN", kedaCalls(ctx, k.caller(t, ""), ref), codes.Unauthenticated)
	// The tenant may ask about its own namespace (nothing named llm there),
	// never about another's.
	tenant := k.caller(t, "tenant")
	wantCode(t, "tenant about "+ns, kedaCalls(ctx, tenant, ref), codes.PermissionDenied)
	own := &pb.ScaledObjectRef{Name: "llm", Namespace: other, ScalerMetadata: ref.ScalerMetadata}
	if _, err := tenant.GetMetricSpec(ctx, own); err != nil {
		t.Errorf("tenant about its own namespace %s: GetMetricSpec = %v, want the spec", other, err)
	}
	if _, err := tenant.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: own, MetricName: metricQueue}); status.Code(err) != codes.NotFound {
		t.Errorf("tenant about its own namespace %s: GetMetrics = %v, want NotFound (no Deployment llm there)", other, err)
	}

	// Idle: a measured 0, inactive.
	var last string
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		v, active, err := kedaRead(ctx, client, ref)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = fmt.Sprintf("value %g, active %v", v, active)
		return v == 0 && !active, nil
	})
	if err != nil {
		t.Fatalf("the idle Deployment never read 0 and inactive (last: %s): %v", last, err)
	}

	stream, err := client.StreamIsActive(ctx, ref)
	if err != nil {
		t.Fatalf("StreamIsActive: %v", err)
	}
	if got, err := stream.Recv(); err != nil || got.Result {
		t.Fatalf("StreamIsActive's first push = %v, %v; want inactive", got, err)
	}

	// Under load past the pod's batch of 4: the queue is what the custom
	// metrics API serves for the Deployment (from the suite's adapter,
	// scraping on its own), and the trigger is active.
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, selector) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	l := startLoad(t, svc.URL, 60, 40*time.Second, 10)
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		v, active, err := kedaRead(ctx, client, ref)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		obj, err := e.ControlPlane.Metrics.Object(ctx, ns, framework.DeploymentKind, d.Name, metricQueue)
		if err != nil {
			last = fmt.Sprintf("KEDA %g; custom metrics: %v", v, err)
			return false, nil
		}
		cm := obj.Value.AsApproximateFloat64()
		last = fmt.Sprintf("KEDA value %g (active %v), custom metrics %g", v, active, cm)
		return v > 0 && active && v == cm, nil
	})
	if err != nil {
		t.Fatalf("under load the KEDA value never matched the custom metrics API's (last: %s): %v", last, err)
	}
	t.Logf("under load: %s", last)
	if err := recvUntil(stream, true); err != nil {
		t.Fatalf("StreamIsActive under load: %v", err)
	}

	// The load ends: the queue drains and the stream pushes inactive.
	l.stop()
	if err := recvUntil(stream, false); err != nil {
		t.Fatalf("StreamIsActive after the load: %v", err)
	}

	// Another namespace has no Deployment of that name: the scaler does not
	// look outside the ScaledObject's namespace.
	elsewhere := &pb.ScaledObjectRef{Name: "llm", Namespace: other, ScalerMetadata: ref.ScalerMetadata}
	if _, err := client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: elsewhere, MetricName: metricQueue}); status.Code(err) != codes.NotFound {
		t.Errorf("GetMetrics for %s from namespace %s = %v, want NotFound", d.Name, other, err)
	}

	// With no pod left, the value is missing: NotFound, never 0.
	scale, err := e.ControlPlane.Client.AppsV1().Deployments(ns).GetScale(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 0
	if _, err := e.ControlPlane.Client.AppsV1().Deployments(ns).UpdateScale(ctx, d.Name, scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		v, _, err := kedaRead(ctx, client, ref)
		if err == nil {
			last = fmt.Sprintf("value %g", v)
			return false, nil
		}
		last = err.Error()
		return status.Code(err) == codes.NotFound, nil
	})
	if err != nil {
		t.Fatalf("at 0 replicas GetMetrics and IsActive never answered NotFound (last: %s): %v", last, err)
	}
	t.Logf("at 0 replicas: %s", last)
}

// recvUntil reads the stream's pushes until one says want; a push never
// repeats the previous one, so at most a few are read (bounded by the
// stream's context).
func recvUntil(stream grpc.ServerStreamingClient[pb.IsActiveResponse], want bool) error {
	for range 10 {
		got, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("waiting for a push of %v: %w", want, err)
		}
		if got.Result == want {
			return nil
		}
	}
	return fmt.Errorf("no push of %v in 10", want)
}

// kedaRead calls GetMetrics then IsActive, as KEDA does on each poll.
func kedaRead(ctx context.Context, c pb.ExternalScalerClient, ref *pb.ScaledObjectRef) (float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: ref.ScalerMetadata["metricName"]})
	if err != nil {
		return 0, false, err
	}
	if len(m.MetricValues) != 1 {
		return 0, false, fmt.Errorf("GetMetrics gave %d values", len(m.MetricValues))
	}
	a, err := c.IsActive(ctx, ref)
	if err != nil {
		return 0, false, err
	}
	return m.MetricValues[0].MetricValueFloat, a.Result, nil
}

// kedaPort is a second adapter (registered as no API) serving the KEDA
// scaler on a loopback port with its serving certificate, and requiring
// client certificates signed by clientCA, as docs/keda.md sets it up.
type kedaPort struct {
	adapter  *framework.Adapter
	addr     string
	clientCA *framework.CA
}

// startKEDAAdapter starts a kedaPort whose Service (and log) is named
// service, with --keda-scaler-client-ca-file and each of grants as a
// --keda-scaler-grant, e.g. "user:keda-operator=*".
func startKEDAAdapter(t *testing.T, e *framework.Environment, service string, grants ...string) *kedaPort {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	k := &kedaPort{addr: "127.0.0.1:" + strconv.Itoa(port)}
	if k.clientCA, err = framework.NewCA("e2e-keda-client-ca"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.ControlPlane.Dir, "keda-"+service)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caFile, err := k.clientCA.WriteCA(dir, "client-ca")
	if err != nil {
		t.Fatal(err)
	}
	args := append(framework.AdapterArgs(), "--keda-scaler-address="+k.addr, "--keda-scaler-client-ca-file="+caFile)
	for _, g := range grants {
		args = append(args, "--keda-scaler-grant="+g)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k.adapter, err = framework.StartAdapter(ctx, e.ControlPlane, framework.AdapterConfig{
		Binary:            e.Adapter.Config().Binary,
		Namespace:         framework.AdapterNamespace,
		Service:           service,
		Args:              args,
		SkipCustomMetrics: true,
	})
	if err != nil {
		t.Fatalf("start an adapter with the KEDA scaler: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k.adapter.Stop(ctx); err != nil {
			t.Errorf("stop the KEDA adapter %s: %v", service, err)
		}
	})
	return k
}

// caller returns KEDA's generated client for the port, presenting a client
// certificate of the port's client CA whose CN is user (the identity the
// port reads from it; "" gives a certificate without a CN).
func (k *kedaPort) caller(t *testing.T, user string) pb.ExternalScalerClient {
	t.Helper()
	kp, err := k.clientCA.Issue(framework.CertSpec{CommonName: user, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return k.dial(t, &cert)
}

// dial returns KEDA's generated client for the port, verifying its serving
// certificate and presenting cert (nil: no client certificate).
func (k *kedaPort) dial(t *testing.T, cert *tls.Certificate) pb.ExternalScalerClient {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(k.adapter.CA.CertPEM) {
		t.Fatal("the adapter's CA has no certificate")
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: k.adapter.ServerName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(k.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewExternalScalerClient(conn)
}

// kedaCalls makes each of the scaler's four calls about ref once (a
// StreamIsActive stream until its first push) and returns their errors by
// method.
func kedaCalls(ctx context.Context, c pb.ExternalScalerClient, ref *pb.ScaledObjectRef) map[string]error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := map[string]error{}
	_, out["GetMetricSpec"] = c.GetMetricSpec(ctx, ref)
	_, out["GetMetrics"] = c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: ref.ScalerMetadata["metricName"]})
	_, out["IsActive"] = c.IsActive(ctx, ref)
	stream, err := c.StreamIsActive(ctx, ref)
	if err == nil {
		_, err = stream.Recv()
	}
	out["StreamIsActive"] = err
	return out
}

// wantCode reports each of calls (kedaCalls) whose code is not want.
func wantCode(t *testing.T, who string, calls map[string]error, want codes.Code) {
	t.Helper()
	for _, m := range []string{"GetMetricSpec", "GetMetrics", "IsActive", "StreamIsActive"} {
		if got := status.Code(calls[m]); got != want {
			t.Errorf("%s: %s = %v, want %s", who, m, calls[m], want)
		}
	}
}
