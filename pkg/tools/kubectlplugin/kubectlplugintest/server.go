// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubectlplugintest serves, on a loopback HTTP server, the few paths of
// the Kubernetes API and of the aggregated custom metrics API that package
// contrast reads: discovery of custom.metrics.k8s.io, pods and Deployments
// filtered by label selector, and metric values for pods (by selector) and
// for Deployments (by name), in the API's own JSON. What it has no value
// for it answers with a 404 Status carrying a reason, as the adapter does.
package kubectlplugintest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
)

// Server is the stand-in API. Set its fields before the first request.
type Server struct {
	URL         string
	Pods        []corev1.Pod
	Deployments []appsv1.Deployment
	// PodValues[metric][pod] is a pod's value of metric.
	PodValues map[string]map[string]float64
	// DeploymentValues[metric][deployment] is a Deployment's value of metric.
	DeploymentValues map[string]map[string]float64
	// Fail, when set, is the HTTP status every metric request answers.
	Fail int
	// FailMessage is the message of those answers ("failing as told" when
	// empty).
	FailMessage string

	mu       sync.Mutex
	requests []string
}

// Namespace is the one namespace the server holds.
const Namespace = "ns"

// New starts a Server on 127.0.0.1; it is closed when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{PodValues: map[string]map[string]float64{}, DeploymentValues: map[string]map[string]float64{}}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Config is a client configuration for the server.
func (s *Server) Config() *rest.Config { return &rest.Config{Host: s.URL} }

// Kubeconfig writes a kubeconfig for the server into dir and returns its path.
func (s *Server) Kubeconfig(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: %s}}]
current-context: x
`, s.URL, Namespace)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// Requests returns the paths asked so far, with their queries.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

const cmPrefix = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + Namespace + "/"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.RequestURI())
	s.mu.Unlock()
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		status(w, http.StatusBadRequest, err.Error())
		return
	}
	switch p := r.URL.Path; {
	case p == "/apis":
		write(w, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{{
			Name:             "custom.metrics.k8s.io",
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: "custom.metrics.k8s.io/v1beta2", Version: "v1beta2"}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "custom.metrics.k8s.io/v1beta2", Version: "v1beta2"},
		}}})
	case p == "/api/v1/namespaces/"+Namespace+"/pods":
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, pod := range s.Pods {
			if sel.Matches(labels.Set(pod.Labels)) {
				list.Items = append(list.Items, pod)
			}
		}
		write(w, list)
	case p == "/apis/apps/v1/namespaces/"+Namespace+"/deployments":
		list := appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}}
		for _, d := range s.Deployments {
			if sel.Matches(labels.Set(d.Labels)) {
				list.Items = append(list.Items, d)
			}
		}
		write(w, list)
	case strings.HasPrefix(p, cmPrefix):
		s.metric(w, strings.Split(strings.TrimPrefix(p, cmPrefix), "/"), sel)
	default:
		status(w, http.StatusNotFound, "the server could not find the requested resource")
	}
}

// metric answers resource/name/metric as the adapter does.
func (s *Server) metric(w http.ResponseWriter, parts []string, sel labels.Selector) {
	if s.Fail != 0 {
		msg := s.FailMessage
		if msg == "" {
			msg = "failing as told"
		}
		status(w, s.Fail, msg)
		return
	}
	if len(parts) != 3 {
		status(w, http.StatusNotFound, "bad path")
		return
	}
	res, name, metric := parts[0], parts[1], parts[2]
	list := cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"}}
	item := func(kind, apiVersion, obj string, v float64) cmv1beta2.MetricValue {
		return cmv1beta2.MetricValue{
			DescribedObject: corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Namespace: Namespace, Name: obj},
			Metric:          cmv1beta2.MetricIdentifier{Name: metric},
			Timestamp:       metav1.Now(),
			Value:           *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
		}
	}
	switch {
	case res == "pods" && name == "*":
		for _, pod := range s.Pods {
			if v, ok := s.PodValues[metric][pod.Name]; ok && sel.Matches(labels.Set(pod.Labels)) {
				list.Items = append(list.Items, item("Pod", "v1", pod.Name, v))
			}
		}
	case res == "deployments.apps":
		if v, ok := s.DeploymentValues[metric][name]; ok {
			list.Items = append(list.Items, item("Deployment", "apps/v1", name, v))
		}
	}
	if len(list.Items) == 0 {
		status(w, http.StatusNotFound, fmt.Sprintf("the server could not find the metric %s for %s %s: no value in the test", metric, res, name))
		return
	}
	write(w, list)
}

func write(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func status(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	reason := metav1.StatusReasonNotFound
	if code != http.StatusNotFound {
		reason = metav1.StatusReasonInternalError
	}
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}

// Pod is a Running pod in Namespace with labels and gpus nvidia.com/gpu.
func Pod(name string, lbls map[string]string, gpus int64) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.2"},
	}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}

// Deployment is a Deployment in Namespace with labels on itself and
// selector on its pods.
func Deployment(name string, lbls, selector map[string]string) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: lbls},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}},
	}
}
