// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corelisters "k8s.io/client-go/listers/core/v1"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// Role-aware questions (disaggregated prefill/decode serving): a metric
// selector requirement role=VALUE restricts a question to the pods whose
// role label (Config.RoleLabel, --role-label; llm-d's llm-d.ai/role by
// default) has that value, on pods, deployments, statefulsets and the
// demand metrics alike. It is carried out by listing pods through a lister
// that leaves the other pods out, so every path that reads a workload's
// pods (the readiness rule, the demand's Ready and starting replicas)
// counts only the role's pods. The role requirement stays in the metric
// selector (its answers echo it, and it keys the workload's demand history
// apart from other roles'); modelMatcher does not match models on it.

// DefaultRoleLabel is the pod label a role selection reads unless
// --role-label says another: llm-d's.
const DefaultRoleLabel = "llm-d.ai/role"

// MaxRoleLen bounds a role value: a label value's 63 bytes.
const MaxRoleLen = 63

// roleValue is a role's spelling: a label value, never empty.
var roleValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// roleOf returns the role a metric selector asks for ("" for none). A role
// requirement must be one equality with a value a pod label can have: any
// other form is a 400 naming the key.
func roleOf(info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (string, error) {
	if metricSelector == nil {
		return "", nil
	}
	reqs, _ := metricSelector.Requirements()
	role := ""
	for _, r := range reqs {
		if r.Key() != catalog.RoleSelectorLabel {
			continue
		}
		vals := r.Values().List()
		switch {
		case role != "":
			return "", badRequest(fmt.Sprintf("%s: the metric selector names %s twice: ask for one role, e.g. %s=prefill", info.Metric, catalog.RoleSelectorLabel, catalog.RoleSelectorLabel))
		case r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && (r.Operator() != selection.In || len(vals) != 1):
			return "", badRequest(fmt.Sprintf("%s: the metric selector's %s must be one equality, e.g. %s=prefill (not %q)", info.Metric, catalog.RoleSelectorLabel, catalog.RoleSelectorLabel, r.String()))
		case len(vals) != 1 || len(vals[0]) > MaxRoleLen || !roleValue.MatchString(vals[0]):
			return "", badRequest(fmt.Sprintf("%s: the metric selector's %s value must be a label value (1 to %d letters, digits, '-', '_' or '.', starting and ending with a letter or digit), e.g. %s=prefill", info.Metric, catalog.RoleSelectorLabel, MaxRoleLen, catalog.RoleSelectorLabel))
		}
		role = vals[0]
	}
	return role, nil
}

// forRole returns the provider that answers a question with metricSelector:
// p itself without a role, else a copy whose pod lister sees only the
// role's pods. The front-door metrics take no role: their pods are routers.
func (p *Provider) forRole(info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*Provider, error) {
	role, err := roleOf(info, metricSelector)
	if err != nil || role == "" {
		return p, err
	}
	if isFrontDoorObject(info.GroupResource) || catalog.IsFrontDoorMetric(info.Metric) {
		return nil, badRequest(fmt.Sprintf("%s: %s selects model-server pods by their %s label; a front door's metrics are not per role", info.Metric, catalog.RoleSelectorLabel, p.roleLabel()))
	}
	q := *p
	q.list.Pods = rolePods{PodLister: p.list.Pods, key: p.roleLabel(), role: role}
	return &q, nil
}

func (p *Provider) roleLabel() string {
	if p.cfg.RoleLabel == "" {
		return DefaultRoleLabel
	}
	return p.cfg.RoleLabel
}

// rolePods lists only the pods whose label key is role.
type rolePods struct {
	PodLister
	key, role string
}

func (r rolePods) Pods(namespace string) corelisters.PodNamespaceLister {
	return rolePodsNS{PodNamespaceLister: r.PodLister.Pods(namespace), key: r.key, role: r.role}
}

type rolePodsNS struct {
	corelisters.PodNamespaceLister
	key, role string
}

// List is the wrapped List of the pods matching selector and the role.
func (r rolePodsNS) List(selector labels.Selector) ([]*corev1.Pod, error) {
	pods, err := r.PodNamespaceLister.List(selector)
	if err != nil {
		return nil, err
	}
	out := pods[:0:0]
	for _, pod := range pods {
		if pod.Labels[r.key] == r.role {
			out = append(out, pod)
		}
	}
	return out, nil
}

// Get is the wrapped Get, refusing a pod of another role (or none).
func (r rolePodsNS) Get(name string) (*corev1.Pod, error) {
	pod, err := r.PodNamespaceLister.Get(name)
	if err != nil {
		return nil, err
	}
	if got, ok := pod.Labels[r.key]; !ok || got != r.role {
		what := "has no " + r.key + " label"
		if ok {
			what = fmt.Sprintf("has %s=%s", r.key, got)
		}
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), fmt.Sprintf("%s (it %s, and the question asks for role %s)", name, what, r.role))
	}
	return pod, nil
}

// withoutKey returns sel without its requirements on key (sel itself when
// it has none).
func withoutKey(sel labels.Selector, key string) labels.Selector {
	if sel == nil {
		return nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return sel
	}
	out, found := labels.NewSelector(), false
	for _, r := range reqs {
		if r.Key() == key {
			found = true
			continue
		}
		out = out.Add(r)
	}
	if !found {
		return sel
	}
	return out
}
