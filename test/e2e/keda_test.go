package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
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
// loopback answers KEDA's own generated client (externalscaler.proto, from
// KEDA's module) over TLS with its serving certificate, for a ScaledObject
// whose trigger names a simulated vLLM Deployment: the spec, the idle
// value 0 (measured) and inactive, the queue under load (the value the
// custom metrics API serves for the Deployment) and active, a push to
// StreamIsActive when the load ends, NotFound (never 0) once the
// Deployment has no pods, and nothing across namespaces. KEDA's operator
// itself is not built here (docs/keda.md says why).
func TestKEDAExternalScaler(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	client := startKEDAAdapter(t, e)
	ns := e.Namespace(t)
	other := e.Namespace(t)
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

// startKEDAAdapter runs a second adapter (registered as no API) serving the
// KEDA scaler on a loopback port with its serving certificate, and returns
// KEDA's generated client for it, verifying that certificate.
func startKEDAAdapter(t *testing.T, e *framework.Environment) pb.ExternalScalerClient {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, err := framework.StartAdapter(ctx, e.ControlPlane, framework.AdapterConfig{
		Binary:            e.Adapter.Config().Binary,
		Namespace:         framework.AdapterNamespace,
		Service:           framework.AdapterService + "-keda",
		Args:              append(framework.AdapterArgs(), "--keda-scaler-address="+addr, "--keda-scaler-allow-unauthenticated"),
		SkipCustomMetrics: true,
	})
	if err != nil {
		t.Fatalf("start an adapter with the KEDA scaler: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop the KEDA adapter: %v", err)
		}
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(a.CA.CertPEM) {
		t.Fatal("the adapter's CA has no certificate")
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: a.ServerName, MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewExternalScalerClient(conn)
}
