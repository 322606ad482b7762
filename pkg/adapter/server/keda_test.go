// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

type denyAll struct{}

func (denyAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "no", nil
}

// The KEDA port gets the rule its flags give it: SubjectAccessReviews need
// the API server's authorizer, and a port that accepts unauthenticated
// callers answers them (the plaintext port here), while one that does not
// refuses them.
func TestKEDAScalerAuthorizationWiring(t *testing.T) {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	p := provider.New(provider.Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		provider.Listers{Pods: corelisters.NewPodLister(idx()), Deployments: appslisters.NewDeploymentLister(idx()), StatefulSets: appslisters.NewStatefulSetLister(idx())},
		store.New(), nil, testclock.NewFakePassiveClock(time.Now()))
	tests := []struct {
		name    string
		kc      KEDAScalerConfig
		authz   kedascaler.Reviewer
		wantErr string
		want    codes.Code // of a plaintext call without a certificate
	}{
		{name: "reviews without an authorizer", kc: KEDAScalerConfig{Plaintext: true, SubjectAccessReview: true}, wantErr: "there is none"},
		{name: "unauthenticated accepted", kc: KEDAScalerConfig{Plaintext: true, AllowUnauthenticated: true}, want: codes.NotFound},
		{name: "unauthenticated refused", kc: KEDAScalerConfig{Plaintext: true, SubjectAccessReview: true}, authz: denyAll{}, want: codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.kc.Address = "127.0.0.1:0"
			srv, err := kedaScaler(&Config{KEDAScaler: tt.kc}, nil, tt.authz, p, prometheus.NewRegistry())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			_, err = pb.NewExternalScalerClient(conn).GetMetrics(cctx, &pb.GetMetricsRequest{ScaledObjectRef: &pb.ScaledObjectRef{
				Name: "so", Namespace: "team-a",
				ScalerMetadata: map[string]string{"metricName": "inference_queue_size", "targetValue": "5", "deployment": "llm"},
			}})
			if status.Code(err) != tt.want {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}
