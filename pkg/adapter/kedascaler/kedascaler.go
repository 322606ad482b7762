// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kedascaler serves KEDA's external scaler API (KEDA's
// externalscaler.proto: IsActive, StreamIsActive, GetMetricSpec,
// GetMetrics) over gRPC, so that a KEDA ScaledObject can scale on the
// adapter's signals without Prometheus in the path.
//
// A trigger's metadata names a signal, a target, and the pods measured: a
// pod label selector, a Deployment or a StatefulSet, always in the
// ScaledObject's own namespace (the ScaledObjectRef's). Values come from the
// custom metrics provider with its rules: a workload's value needs every
// Ready pod's fresh value, and a value that was not measured (no pod, a
// stale or failed scrape) is a gRPC NotFound error, never 0. KEDA counts
// such an error as a failed scaler and applies the ScaledObject's fallback
// when one is set; it never sees a made-up 0. See docs/keda.md.
package kedascaler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// Objects answers a signal for one Deployment or StatefulSet, aggregated
// over its pods (provider.Provider implements it).
type Objects interface {
	GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error)
}

// Selected answers a signal aggregated over the pods a selector picks
// (provider.External implements it).
type Selected interface {
	GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error)
}

// Config holds the scaler's settings.
type Config struct {
	// StreamInterval is how often StreamIsActive reads the value again; a
	// change is pushed at most this often. The scrape interval suits it.
	StreamInterval time.Duration
	// CallTimeout bounds the work of one call (one read of a value).
	CallTimeout time.Duration
	// Access is who may ask about which namespace (authz.go); the zero
	// Access refuses every call.
	Access Access
}

// Defaults of Config's zero fields.
const (
	DefaultStreamInterval = 5 * time.Second
	DefaultCallTimeout    = 10 * time.Second
	minStreamInterval     = time.Second
)

// Scaler implements KEDA's ExternalScalerServer.
type Scaler struct {
	pb.UnimplementedExternalScalerServer // StreamMetricSpec: KEDA falls back to GetMetricSpec

	cfg      Config
	objects  Objects
	selected Selected
}

var _ pb.ExternalScalerServer = (*Scaler)(nil)

// New returns a Scaler reading values from objects and selected.
func New(cfg Config, objects Objects, selected Selected) *Scaler {
	if cfg.StreamInterval <= 0 {
		cfg.StreamInterval = DefaultStreamInterval
	}
	cfg.StreamInterval = max(cfg.StreamInterval, minStreamInterval)
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	return &Scaler{cfg: cfg, objects: objects, selected: selected}
}

// Register registers s on a gRPC server.
func (s *Scaler) Register(r grpc.ServiceRegistrar) { pb.RegisterExternalScalerServer(r, s) }

// GetMetricSpec returns the trigger's metric and target. It validates the
// metadata but reads no value: KEDA asks it when it builds the HPA.
func (s *Scaler) GetMetricSpec(ctx context.Context, ref *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	q, err := s.admit(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{{
		MetricName:      q.metric,
		TargetSize:      toInt64(math.Ceil(q.target)),
		TargetSizeFloat: q.target,
	}}}, nil
}

// GetMetrics returns the trigger's current value, or NotFound with the
// reason when it was not measured.
func (s *Scaler) GetMetrics(ctx context.Context, req *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	q, err := s.admit(ctx, req.GetScaledObjectRef())
	if err != nil {
		return nil, err
	}
	if name := req.GetMetricName(); name != "" && name != q.metric {
		return nil, status.Errorf(codes.InvalidArgument, "metricName %q was asked, but this trigger's metadata names %q", name, q.metric)
	}
	v, err := s.read(ctx, q)
	if err != nil {
		return nil, err
	}
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{{
		MetricName:       q.metric,
		MetricValue:      toInt64(math.Round(v)),
		MetricValueFloat: v,
	}}}, nil
}

// IsActive reports whether the value exceeds the activation target
// (activationTargetValue, default 0); an unmeasured value is NotFound.
func (s *Scaler) IsActive(ctx context.Context, ref *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	q, err := s.admit(ctx, ref)
	if err != nil {
		return nil, err
	}
	v, err := s.read(ctx, q)
	if err != nil {
		return nil, err
	}
	return &pb.IsActiveResponse{Result: v > q.activation}, nil
}

// StreamIsActive sends IsActive's answer at once and then whenever it
// changes, reading the value every StreamInterval (the caller authorized
// again each time), until the stream's context ends. When the value cannot be read the stream ends with that
// error (KEDA reconnects after a pause), rather than sending "inactive".
func (s *Scaler) StreamIsActive(ref *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	ctx := stream.Context()
	q, err := s.admit(ctx, ref)
	if err != nil {
		return err
	}
	t := time.NewTicker(s.cfg.StreamInterval)
	defer t.Stop()
	first, last := true, false
	for {
		// The caller is authorized again at each read (the reviewer's
		// verdicts are cached): one no longer allowed sees the stream end.
		if !first {
			if _, err := s.admit(ctx, ref); err != nil {
				return err
			}
		}
		v, err := s.read(ctx, q)
		if err != nil {
			return err
		}
		if active := v > q.activation; first || active != last {
			if err := stream.Send(&pb.IsActiveResponse{Result: active}); err != nil {
				return fmt.Errorf("sending to the stream of %.64q in namespace %.64q: %w", ref.GetName(), ref.GetNamespace(), err)
			}
			first, last = false, active
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
}

// toInt64 converts a finite v to an int64, saturating at the int64 bounds
// (a plain conversion of a float out of range is implementation-defined:
// math.MinInt64 on amd64, a negative target or value).
func toInt64(v float64) int64 {
	switch {
	case v >= math.MaxInt64: // float64(math.MaxInt64) is 2^63
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

func parseRef(ref *pb.ScaledObjectRef) (query, error) {
	q, err := parseQuery(ref.GetNamespace(), ref.GetScalerMetadata())
	if err != nil {
		return q, status.Errorf(codes.InvalidArgument, "ScaledObject %.64q in namespace %.64q: %v", ref.GetName(), ref.GetNamespace(), err)
	}
	return q, nil
}

var (
	deploymentsGR  = schema.GroupResource{Group: "apps", Resource: "deployments"}
	statefulsetsGR = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	servicesGR     = schema.GroupResource{Resource: "services"}
)

// read returns q's value from the provider, within the call timeout. The
// provider's errors become gRPC statuses with its message: 404 (no value)
// is NotFound, 400 InvalidArgument. A 404 names no pod and quotes no
// scrape error (provider.WithoutPodNames).
func (s *Scaler) read(ctx context.Context, q query) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	// The caller named a workload, a Service or a selector, not pods: its
	// 404s say how many pods lack a value and why, not which. The pods it
	// asks about are kept as demand in the KEDA port's own pool, which
	// cannot evict the HPAs' demand.
	ctx = targets.WithPool(provider.WithoutPodNames(ctx), targets.PoolKEDA)
	var model labels.Selector
	if set := q.metricLabels(); len(set) > 0 {
		model = labels.SelectorFromSet(set)
	}
	var v float64
	switch q.kind {
	case kindDeployment, kindStatefulSet, kindService:
		gr := map[workloadKind]schema.GroupResource{kindDeployment: deploymentsGR, kindStatefulSet: statefulsetsGR, kindService: servicesGR}[q.kind]
		info := cmprovider.CustomMetricInfo{GroupResource: gr, Namespaced: true, Metric: q.metric}
		mv, err := s.objects.GetMetricByName(ctx, types.NamespacedName{Namespace: q.namespace, Name: q.name}, info, model)
		if err != nil {
			return 0, toStatus(ctx, err)
		}
		v = mv.Value.AsApproximateFloat64()
	default:
		sel := q.pods
		for _, kv := range []struct{ metaKey, label, value string }{{KeyModelName, "model_name", q.model}, {KeyRole, catalog.RoleSelectorLabel, q.role}} {
			if kv.value == "" {
				continue
			}
			r, err := labels.NewRequirement(kv.label, selection.Equals, []string{kv.value})
			if err != nil {
				return 0, status.Errorf(codes.InvalidArgument, "%s: %v", kv.metaKey, err)
			}
			sel = sel.Add(*r)
		}
		list, err := s.selected.GetExternalMetric(ctx, q.namespace, sel, cmprovider.ExternalMetricInfo{Metric: q.metric})
		if err != nil {
			return 0, toStatus(ctx, err)
		}
		if len(list.Items) != 1 {
			return 0, status.Errorf(codes.Internal, "the provider gave %d values for pods matching %q, not one", len(list.Items), q.pods.String())
		}
		v = list.Items[0].Value.AsApproximateFloat64()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, status.Errorf(codes.OutOfRange, "%s in %s: the value is not a finite number", q.metric, q.namespace)
	}
	klog.V(4).InfoS("KEDA scaler read", "namespace", q.namespace, "metric", q.metric, "workload", q.name, "podSelector", q.pods, "value", v)
	return v, nil
}

// toStatus turns a provider error into a gRPC status carrying its message.
func toStatus(ctx context.Context, err error) error {
	var se apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &se) && se.Status().Message != "" {
		msg = se.Status().Message
	}
	switch {
	case apierrors.IsNotFound(err):
		return status.Error(codes.NotFound, msg)
	case apierrors.IsBadRequest(err):
		return status.Error(codes.InvalidArgument, msg)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	default:
		return status.Error(codes.Internal, msg)
	}
}

// metricLabels is q's metric selector on a workload or Service: its model
// and its role, where set.
func (q query) metricLabels() labels.Set {
	set := labels.Set{}
	if q.model != "" {
		set["model_name"] = q.model
	}
	if q.role != "" {
		set[catalog.RoleSelectorLabel] = q.role
	}
	return set
}
