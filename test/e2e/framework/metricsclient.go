// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmclient "k8s.io/metrics/pkg/client/custom_metrics"
	emclient "k8s.io/metrics/pkg/client/external_metrics"
)

// The kinds the tests ask the custom metrics API about.
var (
	PodKind        = schema.GroupKind{Kind: "Pod"}
	ServiceKind    = schema.GroupKind{Kind: "Service"}
	DeploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
)

// MetricsRequestTimeout bounds each request of a MetricsClient whose
// config sets no Timeout: the typed clients take no context.
const MetricsRequestTimeout = 10 * time.Second

// MetricsClient reads custom.metrics.k8s.io and external.metrics.k8s.io
// through the typed clients of k8s.io/metrics, built as
// kube-controller-manager builds the HPA controller's: the custom metrics
// client asks discovery for the group's preferred version (v1beta2 where
// the adapter serves it, else v1beta1) and converts every answer to
// v1beta2, so a test reads exactly what the HPA reads. The same
// construction as pkg/tools/kubectlplugin's client, with Services mapped too.
//
// Tests that check the wire itself (authorization, hostile questions, a
// 404's message, exact JSON) send raw requests instead.
type MetricsClient struct {
	Custom   cmclient.CustomMetricsClient
	External emclient.ExternalMetricsClient
}

// NewMetricsClient returns a MetricsClient for cfg. Without a rate limit
// in cfg it allows 50 requests per second (burst 100), without a timeout
// it bounds each request by MetricsRequestTimeout. It sends nothing until
// the first question; the preferred version is looked up then and kept.
func NewMetricsClient(cfg *rest.Config) (*MetricsClient, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = MetricsRequestTimeout
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	ext, err := emclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	return &MetricsClient{
		Custom:   cmclient.NewForConfig(cfg, metricsRESTMapper(), cmclient.NewAvailableAPIsGetter(disc)),
		External: ext,
	}, nil
}

// metricsRESTMapper maps the kinds asked about to their resources without
// a discovery round trip.
func metricsRESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion})
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Service"), meta.RESTScopeNamespace)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	return m
}

// Pods asks for metric of the pods matching selector in ns, as the HPA
// asks for a Pods metric; metricSelector (nil: everything) selects the
// metric's series. The error of a refused question is the API's status
// error (apierrors.IsNotFound etc. work on it). ctx is checked before the
// request, which is bounded by the client's timeout.
func (c *MetricsClient) Pods(ctx context.Context, ns, metric string, selector, metricSelector labels.Selector) (*cmv1beta2.MetricValueList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if metricSelector == nil {
		metricSelector = labels.Everything()
	}
	list, err := c.Custom.NamespacedMetrics(ns).GetForObjects(PodKind, selector, metric, metricSelector)
	if err != nil {
		return nil, fmt.Errorf("custom metric %s of pods %q in %s: %w", metric, selector, ns, err)
	}
	return list, nil
}

// PodValues returns metric of the pods matching selector in ns by pod
// name. A pod the answer leaves out is absent, not 0.
func (c *MetricsClient) PodValues(ctx context.Context, ns, metric string, selector labels.Selector) (map[string]float64, error) {
	list, err := c.Pods(ctx, ns, metric, selector, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(list.Items))
	for _, it := range list.Items {
		out[it.DescribedObject.Name] = it.Value.AsApproximateFloat64()
	}
	return out, nil
}

// Object asks for metric of the object kind/name in ns, as the HPA asks
// for an Object metric.
func (c *MetricsClient) Object(ctx context.Context, ns string, kind schema.GroupKind, name, metric string) (*cmv1beta2.MetricValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := c.Custom.NamespacedMetrics(ns).GetForObject(kind, name, metric, labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("custom metric %s of %s %s/%s: %w", metric, kind, ns, name, err)
	}
	return v, nil
}

// ExternalValues asks for the external metric of ns selected by
// selector, as the HPA asks for an External metric.
func (c *MetricsClient) ExternalValues(ctx context.Context, ns, metric string, selector labels.Selector) (*emv1beta1.ExternalMetricValueList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list, err := c.External.NamespacedMetrics(ns).List(metric, selector)
	if err != nil {
		return nil, fmt.Errorf("external metric %s %q in %s: %w", metric, selector, ns, err)
	}
	return list, nil
}
