// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
)

// The ScaledObjectRef's namespace is used as a namespace (the pods looked
// up, the demand kept for the selector): a string that cannot name one is
// refused, so that a client reaching the port cannot make the adapter keep
// demand under arbitrary, up to 64 KiB long, namespace keys.
// Was wrong: any string was taken, so a 64 KiB one grew demand and errors.
func TestNamespaceMustBeAName(t *testing.T) {
	e := fleet(t)
	for _, ns := range []string{
		"Team-A",
		"team-a/llm",
		"../team-b",
		strings.Repeat("a", 64),
		strings.Repeat("n", 60<<10),
	} {
		name := ns
		if len(name) > 70 {
			name = name[:20] + "..."
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := ref(ns, md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=llm"))
			_, err1 := e.client.GetMetricSpec(ctx, r)
			_, err2 := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r})
			_, err3 := e.client.IsActive(ctx, r)
			for i, err := range []error{err1, err2, err3} {
				msg := status.Convert(err).Message()
				if len(msg) > 1024 {
					t.Errorf("call %d: message of %d bytes quotes the whole namespace", i, len(msg))
					msg = msg[:1024]
				}
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "not a valid namespace") {
					t.Errorf("call %d: got %s: %s, want InvalidArgument saying the namespace is not valid", i, status.Code(err), msg)
				}
			}
		})
	}
}

// A target or value too large for an int64 gives the integer fields of the
// answer the largest int64, not whatever the float-to-int conversion makes
// of it (math.MinInt64 on amd64: a negative target or value).
// Was wrong: such a number was converted to math.MinInt64, a negative value.
func TestHugeNumbersFitTheIntegerFields(t *testing.T) {
	huge := map[string]string{"app": "huge"}
	e := serve(t, newScaler(t, []fakePod{
		{ns: "team-a", name: "h1", labels: huge, page: strings.Replace(vllmPage(0, 1, 0.1), "vllm:num_requests_waiting{engine=\"0\",model_name=\""+model+"\"} 0.0", "vllm:num_requests_waiting{engine=\"0\",model_name=\""+model+"\"} 1e19", 1), scraped: true},
	}, []*appsv1.Deployment{deployment("team-a", "huge", huge)}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tests := []struct {
		name      string
		target    string
		wantSpec  int64
		wantValue int64
	}{
		{name: "target 1e300", target: "1e300", wantSpec: math.MaxInt64, wantValue: math.MaxInt64},
		{name: "target 2^63", target: "9223372036854775808", wantSpec: math.MaxInt64, wantValue: math.MaxInt64},
		{name: "target 5", target: "5", wantSpec: 5, wantValue: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ref("team-a", md("metricName", "inference_queue_size", "targetValue", tt.target, "deployment", "huge"))
			spec, err := e.client.GetMetricSpec(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.MetricSpecs[0].TargetSize; got != tt.wantSpec {
				t.Errorf("TargetSize %d, want %d", got, tt.wantSpec)
			}
			got, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: "inference_queue_size"})
			if err != nil {
				t.Fatal(err)
			}
			if v := got.MetricValues[0]; v.MetricValue != tt.wantValue || v.MetricValueFloat != 1e19 {
				t.Errorf("MetricValue %d (float %v), want %d (float 1e19)", v.MetricValue, v.MetricValueFloat, tt.wantValue)
			}
		})
	}
}
