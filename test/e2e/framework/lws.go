// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// The labels the LeaderWorkerSet controller gives every pod of a group.
const (
	LWSNameLabel        = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupIndexLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// LWSGVR is leaderworkersets.leaderworkerset.x-k8s.io/v1.
var LWSGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition in manifest (YAML), or
// leaves the one already there, and waits until it is Established.
func InstallCRD(ctx context.Context, cp *ControlPlane, manifest []byte) error {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(manifest, &obj.Object); err != nil {
		return fmt.Errorf("crd: parse: %w", err)
	}
	res := cp.Dynamic.Resource(crdGVR)
	if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("crd: create %s: %w", obj.GetName(), err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// LWSPlayer plays the LeaderWorkerSet controller for one LWS, since none
// runs here: every Interval it reads the LWS's spec.replicas and
// leaderWorkerTemplate.size, creates the missing groups' pods (the leader
// LWS-N, owned by the LWS, and workers LWS-N-W, owned by their leader, as
// the controller's worker StatefulSet is), deletes the groups past
// spec.replicas, and writes status.replicas (the groups that exist) and
// status.hpaPodSelector (the leaders), which the scale subresource reports
// to the HPA. Pods are made by Pod(group, worker) with the LWS's labels
// added.
type LWSPlayer struct {
	CP        *ControlPlane
	Namespace string
	Name      string
	// Pod returns the pod of a group's worker (0: the leader), without
	// name, namespace, LWS labels or owners.
	Pod      func(group, worker int) *corev1.Pod
	Interval time.Duration
}

// Run plays the controller until ctx is done; a failed round is retried.
func (p *LWSPlayer) Run(ctx context.Context, logf func(format string, args ...any)) {
	interval := p.Interval
	if interval == 0 {
		interval = 500 * time.Millisecond
	}
	_ = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			logf("lws %s/%s: %v", p.Namespace, p.Name, err)
		}
		return false, nil
	})
}

// Sync is one round of Run.
func (p *LWSPlayer) Sync(ctx context.Context) error {
	res := p.CP.Dynamic.Resource(LWSGVR).Namespace(p.Namespace)
	lws, err := res.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	replicas, _, _ := unstructured.NestedInt64(lws.Object, "spec", "replicas")
	size, ok, _ := unstructured.NestedInt64(lws.Object, "spec", "leaderWorkerTemplate", "size")
	if !ok || size < 1 {
		size = 1
	}
	pods := p.CP.Client.CoreV1().Pods(p.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{LWSNameLabel: p.Name}).String()})
	if err != nil {
		return err
	}
	have := map[string]*corev1.Pod{}
	groups := map[int]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		have[pod.Name] = pod
		g, err := strconv.Atoi(pod.Labels[LWSGroupIndexLabel])
		if err != nil {
			continue
		}
		if int64(g) >= replicas {
			if pod.DeletionTimestamp == nil {
				if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			continue
		}
		if pod.DeletionTimestamp == nil && pod.Labels[LWSWorkerIndexLabel] == "0" {
			groups[g] = true
		}
	}
	for g := 0; int64(g) < replicas; g++ {
		leaderName := p.Name + "-" + strconv.Itoa(g)
		leader := have[leaderName]
		if leader == nil {
			owner := metav1.OwnerReference{APIVersion: LWSGVR.GroupVersion().String(), Kind: "LeaderWorkerSet", Name: p.Name, UID: lws.GetUID(), Controller: new(true), BlockOwnerDeletion: new(true)}
			if leader, err = p.create(ctx, leaderName, g, 0, owner); err != nil {
				return err
			}
			groups[g] = true
		}
		for w := 1; int64(w) < size; w++ {
			name := leaderName + "-" + strconv.Itoa(w)
			if have[name] != nil {
				continue
			}
			owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID, Controller: new(true), BlockOwnerDeletion: new(true)}
			if _, err := p.create(ctx, name, g, w, owner); err != nil {
				return err
			}
		}
	}
	status := map[string]any{
		"replicas":       int64(len(groups)),
		"hpaPodSelector": labels.SelectorFromSet(labels.Set{LWSNameLabel: p.Name, LWSWorkerIndexLabel: "0"}).String(),
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (p *LWSPlayer) create(ctx context.Context, name string, group, worker int, owner metav1.OwnerReference) (*corev1.Pod, error) {
	pod := p.Pod(group, worker)
	pod.Name, pod.Namespace = name, p.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[LWSNameLabel] = p.Name
	pod.Labels[LWSGroupIndexLabel] = strconv.Itoa(group)
	pod.Labels[LWSWorkerIndexLabel] = strconv.Itoa(worker)
	pod.OwnerReferences = []metav1.OwnerReference{owner}
	got, err := p.CP.Client.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", name, err)
	}
	return got, nil
}
