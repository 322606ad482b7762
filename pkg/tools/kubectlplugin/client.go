// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cmclient "k8s.io/metrics/pkg/client/custom_metrics"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
)

// GPUResource is the extended resource whose requests count a pod's GPUs.
const GPUResource = corev1.ResourceName("nvidia.com/gpu")

var (
	podKind        = schema.GroupKind{Kind: "Pod"}
	deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
)

// Client reads pods and Deployments from the Kubernetes API and their
// values from the custom metrics API, through the typed client of
// k8s.io/metrics/pkg/client/custom_metrics: the client the HPA controller
// uses, with the API version chosen by discovery as the HPA does.
type Client struct {
	Kube    kubernetes.Interface
	Metrics cmclient.CustomMetricsClient
}

// NewClient returns a Client for cfg. The typed metrics client takes no
// context: cfg.Timeout bounds each of its requests. Without a rate limit in
// cfg, it allows 50 requests per second (burst 100): one round asks a few
// dozen questions, which client-go's default of 5 per second would spread
// over seconds.
func NewClient(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &Client{
		Kube:    kube,
		Metrics: cmclient.NewForConfig(cfg, restMapper(), cmclient.NewAvailableAPIsGetter(disc)),
	}, nil
}

// restMapper maps the two kinds asked about (pods, Deployments) to their
// resources without a discovery round trip.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion})
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	return m
}

// Pods reads every signal of the Running pods matching selector in
// namespace, as the HPA would read a Pods metric. A 404 for a signal means
// no pod has it and is not an error; other failures are.
func (c *Client) Pods(ctx context.Context, namespace, selector string) ([]Row, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods matching %q in %s: %w", selector, namespace, err)
	}
	byName := map[string]*Row{}
	var rows []*Row
	for i := range pods.Items {
		p := &pods.Items[i]
		if !running(p) {
			continue
		}
		r := &Row{Pod: p.Name, GPUs: PodGPUs(p), Values: map[catalog.Signal]float64{}}
		byName[p.Name] = r
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no running pods match %q in namespace %s", selector, namespace)
	}
	for _, s := range catalog.All() {
		vals, _, err := c.podValues(ctx, namespace, sel, s)
		if err != nil {
			return nil, err
		}
		for name, v := range vals {
			if r := byName[name]; r != nil {
				r.Values[s] = v
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Pod < rows[j].Pod })
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out, nil
}

// podValues asks the custom metrics API for s of the pods matching sel, as
// the HPA asks for a Pods metric. A 404 (no pod has a value) is an empty
// answer with the API's reason, not an error.
func (c *Client) podValues(ctx context.Context, namespace string, sel labels.Selector, s catalog.Signal) (vals map[string]float64, why string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	list, err := c.Metrics.NamespacedMetrics(namespace).GetForObjects(podKind, sel, s.Name(), labels.Everything())
	if apierrors.IsNotFound(err) {
		return nil, notFoundReason(err), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s of pods %q in %s: %w", s.Name(), sel, namespace, err)
	}
	vals = make(map[string]float64, len(list.Items))
	for _, it := range list.Items {
		vals[it.DescribedObject.Name] = it.Value.AsApproximateFloat64()
	}
	return vals, "", nil
}

// objectValue asks for s of one Deployment, as the HPA asks for an Object
// metric. A 404 returns ok false and the API's reason, not an error.
func (c *Client) objectValue(ctx context.Context, namespace, name string, s catalog.Signal) (v float64, ok bool, why string, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, "", err
	}
	mv, err := c.Metrics.NamespacedMetrics(namespace).GetForObject(deploymentKind, name, s.Name(), labels.Everything())
	if apierrors.IsNotFound(err) {
		return 0, false, notFoundReason(err), nil
	}
	if err != nil {
		return 0, false, "", fmt.Errorf("reading %s of deployment %s/%s: %w", s.Name(), namespace, name, err)
	}
	return mv.Value.AsApproximateFloat64(), true, "", nil
}

// notFoundReason is the message of the API's 404: why there is no value,
// made printable (JSON escapes C0 controls, not C1 ones or overrides).
func notFoundReason(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return escape.Printable(status.Status().Message)
	}
	return escape.Printable(err.Error())
}

// running reports whether a pod holds its resources now: Running, not
// being deleted. (The adapter serves values for the same pods.)
func running(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
}

// PodGPUs returns the GPUs the scheduler reserves for p: its effective
// nvidia.com/gpu request as Kubernetes computes it — the larger of the sum
// over its containers (and restartable init "sidecar" containers) and the
// largest single init container. A container's request is its limit when
// only the limit is set (extended resources need the two equal).
func PodGPUs(p *corev1.Pod) int64 {
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		sum += containerGPUs(c)
	}
	for _, c := range p.Spec.InitContainers {
		n := containerGPUs(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum += n
			continue
		}
		initMax = max(initMax, n)
	}
	return max(sum, initMax)
}

func containerGPUs(c corev1.Container) int64 {
	q, ok := c.Resources.Requests[GPUResource]
	if !ok {
		q, ok = c.Resources.Limits[GPUResource]
	}
	if !ok {
		return 0
	}
	return q.Value()
}
