// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// Where the soak's objects live.
const (
	namespace     = "soak"
	metric        = "inference_queue_size"
	podImage      = "soak-page" // never run: the soak serves the pages itself
	soakLabel     = "soak"      // every soak pod has soak=1: the question asked
	hpaName       = "soak-hpa"  // the Deployment and its HPA
	hpaReplicas   = 3
	hpaPodValue   = 10 // every HPA pod's queue: exactly the HPA's target
	serverAnnot   = "inference-metrics-adapter/server"
	adapterCount  = 2
	scrapeEvery   = time.Second
	scrapeTimeout = 800 * time.Millisecond
	maxAge        = 5 * time.Second
)

// adapterArgs are the replicas' flags: a 1 s scrape, the chart's log
// verbosity (--v=1), no shutdown delay (nothing is behind a load balancer).
func adapterArgs() []string {
	return []string{"--scrape-interval=" + scrapeEvery.String(), "--scrape-timeout=" + scrapeTimeout.String(),
		"--max-age=" + maxAge.String(), "--v=1", "--shutdown-delay=0s",
		"--gpu-agent-namespace=" + framework.AdapterNamespace}
}

// Address pools: 127.4.0.x for churned and fixed pods, 127.4.1.x for the
// HPA Deployment's pods (x in 2..250).
func poolIP(pool, i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 4, byte(pool), byte(i + 2)}) }

const poolSize = 249

// env is what the soak starts.
type env struct {
	run      *framework.RunDir
	cp       *framework.ControlPlane
	adapters *framework.AdapterReplicas
	pods     *podServer
	client   kubernetes.Interface
	// metrics asks what the HPA asks, with the HPA's typed client.
	metrics *framework.MetricsClient
}

// setup builds the adapter, starts the control plane, the pod server and
// two adapter replicas behind one APIService.
func (e *env) setup(ctx context.Context, binDir string, say func(string, ...any)) error {
	say("building the adapter; starting etcd, kube-apiserver and kube-controller-manager from %s", binDir)
	adapterBin, err := e.run.Build(ctx, framework.ComponentAdapter)
	if err != nil {
		return err
	}
	if e.cp, err = framework.StartControlPlane(ctx, binDir, e.run.Dir); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	cfg := framework.Unthrottled(e.cp.Config)
	cfg.Timeout = 5 * time.Second
	if e.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if e.metrics, err = framework.NewMetricsClient(cfg); err != nil {
		return err
	}
	if e.pods, err = newPodServer(); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	// Pods are admitted once the namespace has its default ServiceAccount.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for ServiceAccount %s/default: %w", namespace, err)
	}
	say("starting %d adapter replicas behind one APIService (%v)", adapterCount, adapterArgs())
	e.adapters, err = framework.StartAdapterReplicas(ctx, e.cp, framework.AdapterConfig{
		Binary:    adapterBin,
		Namespace: framework.AdapterNamespace,
		Service:   framework.AdapterService,
		Args:      adapterArgs(),
	}, adapterCount)
	if err != nil {
		return fmt.Errorf("start adapters: %w", err)
	}
	return nil
}

// podSpec is a soak pod: served by the soak at port podPort, read as vLLM V1.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{
			Name:  "server",
			Image: podImage,
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: podPort}},
		}},
	}
}

func podMeta(name, role string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{soakLabel: "1", "role": role},
		Annotations: map[string]string{serverAnnot: "vllm-v1"}}
}

// createHPA creates the Deployment the HPA watches and an autoscaling/v2
// HPA on inference_queue_size with its pods' value as the target and no
// scale-down stabilization: one wrong low reading scales it down at once.
func (e *env) createHPA(ctx context.Context) error {
	labels := map[string]string{soakLabel: "1", "role": hpaName}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: hpaName, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(hpaReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{serverAnnot: "vllm-v1"}},
				Spec:       podSpec(),
			},
		},
	}
	if _, err := e.client.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment %s: %w", hpaName, err)
	}
	target := resource.MustParse(fmt.Sprint(hpaPodValue))
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: hpaName, Namespace: namespace},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: hpaName},
			MinReplicas:    new(int32(1)),
			MaxReplicas:    6,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: metric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(0))},
			},
		},
	}
	if _, err := e.client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Create(ctx, h, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create HPA %s: %w", hpaName, err)
	}
	return nil
}

// teardown stops everything it started, by PID: the adapters (after
// deleting the APIServices), the pod server, the control plane.
func (e *env) teardown(say func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	say("stopping the adapters, the pods and the control plane")
	var errs []error
	if e.adapters != nil {
		errs = append(errs, e.adapters.Stop(ctx))
	}
	if e.pods != nil {
		errs = append(errs, e.pods.close())
	}
	if e.cp != nil {
		errs = append(errs, e.cp.Stop())
	}
	return errors.Join(errs...)
}
