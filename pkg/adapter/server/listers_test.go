// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// fullPod is a vLLM pod as the API server sends it: everything a
// Deployment, the scheduler, admission and the kubelet fill in.
func fullPod(i int) *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
	grace := int64(30)
	tolerate := int64(300)
	deleting := metav1.NewTime(now.Add(time.Minute))
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}}, PeriodSeconds: 5}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "vllm-7d9f8b6c4-" + string(rune('a'+i%26)), GenerateName: "vllm-7d9f8b6c4-", Namespace: "inference",
			UID: "5f0c7a52-1b7e-4f62-9a77-0c1d2e3f4a5b", ResourceVersion: "123456", Generation: 1,
			CreationTimestamp: now, DeletionTimestamp: &deleting, DeletionGracePeriodSeconds: &grace,
			Labels:      map[string]string{"app": "vllm", "pod-template-hash": "7d9f8b6c4"},
			Annotations: map[string]string{targets.AnnotationScrape: "true", targets.AnnotationMaxBatchSize: "256", "kubectl.kubernetes.io/restartedAt": now.String()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "vllm-7d9f8b6c4",
				UID: "0b5e3c1a-2d4f-4e6a-8b9c-1d2e3f4a5b6c", Controller: new(true), BlockOwnerDeletion: new(true)}},
			Finalizers:    []string{"example.com/keep"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}},
		},
		Spec: corev1.PodSpec{
			NodeName: "gpu-node-3", ServiceAccountName: "default", SchedulerName: "default-scheduler", DNSPolicy: corev1.DNSClusterFirst,
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, SecurityContext: &corev1.PodSecurityContext{},
			Volumes:        []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
			InitContainers: []corev1.Container{{Name: "fetch-weights", Image: "busybox", Ports: []corev1.ContainerPort{{Name: "init", ContainerPort: 1}}}},
			Containers: []corev1.Container{
				{Name: "log-shipper", Image: "fluent-bit:3"},
				{
					Name: "vllm", Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "256"},
					Env:            []corev1.EnvVar{{Name: "HF_HOME", Value: "/models"}},
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 8001, Protocol: corev1.ProtocolTCP}},
					Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
					VolumeMounts:   []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
					ReadinessProbe: probe, LivenessProbe: probe, TerminationMessagePath: "/dev/termination-log", ImagePullPolicy: corev1.PullIfNotPresent,
				},
			},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerate},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.244.3.17", PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}}, HostIP: "192.168.0.13", StartTime: &now, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "", Message: ""},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm", Ready: true, RestartCount: 0, Image: "vllm/vllm-openai:v0.11.0", ImageID: "sha256:0123", ContainerID: "containerd://abc"}},
		},
	}
}

func TestSlimPodKeepsWhatTheAdapterReads(t *testing.T) {
	full := fullPod(0)
	got, err := newSharedParts().slimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		TypeMeta: full.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: full.Name, Namespace: full.Namespace, UID: full.UID, ResourceVersion: full.ResourceVersion,
			Labels: full.Labels, OwnerReferences: full.OwnerReferences,
			// Not kubectl's restartedAt: the adapter does not read it.
			Annotations:       map[string]string{targets.AnnotationScrape: "true", targets.AnnotationMaxBatchSize: "256"},
			CreationTimestamp: full.CreationTimestamp, DeletionTimestamp: full.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: "gpu-node-3", Containers: []corev1.Container{{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "metrics", ContainerPort: 8001}}}}},
		// The Ready condition keeps when it turned: the demand forecast's
		// automatic horizon is its time since the pod's creation.
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.3.17", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: full.Status.Conditions[3].LastTransitionTime}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slim pod (-want +got):\n%s", diff)
	}
}

// TestSlimPodAnswersAlike checks, for pods that differ in every field the
// adapter reads, that what the adapter derives from a pod is the same
// before and after slimPod.
func TestSlimPodAnswersAlike(t *testing.T) {
	trust := targets.AgentTrust{Selector: labels.SelectorFromSet(labels.Set{"app": "vllm"}), Namespace: "inference"}
	tests := []struct {
		name string
		edit func(p *corev1.Pod)
	}{
		{"as sent", func(*corev1.Pod) {}},
		{"not deleting", func(p *corev1.Pod) { p.DeletionTimestamp = nil }},
		{"pending, no IP", func(p *corev1.Pod) { p.Status.Phase, p.Status.PodIP = corev1.PodPending, "" }},
		{"not ready", func(p *corev1.Pod) { p.Status.Conditions[3].Status = corev1.ConditionFalse }},
		{"no Ready condition", func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[:3] }},
		{"port annotation", func(p *corev1.Pod) { p.Annotations[targets.AnnotationPort] = "9400" }},
		{"no named port", func(p *corev1.Pod) { p.Spec.Containers[1].Ports[0].Name, p.Spec.Containers[1].Ports[1].Name = "a", "b" }},
		{"no ports", func(p *corev1.Pod) { p.Spec.Containers[1].Ports = nil }},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{"a DaemonSet's", func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "DaemonSet" }},
		{"path annotation", func(p *corev1.Pod) { p.Annotations[targets.AnnotationPath] = "/stats" }},
		{"server annotation", func(p *corev1.Pod) { p.Annotations[targets.AnnotationServer] = "tgi" }},
		{"unknown server", func(p *corev1.Pod) { p.Annotations[targets.AnnotationServer] = "nope" }},
		{"front door", func(p *corev1.Pod) { p.Annotations[targets.AnnotationFrontDoor] = " svc " }},
		{"not opted in", func(p *corev1.Pod) { delete(p.Annotations, targets.AnnotationScrape) }},
		{"no annotation read", func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/note": "x"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			full := fullPod(0)
			tt.edit(full)
			obj, err := newSharedParts().slimPod(full.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := obj.(*corev1.Pod)
			derive := func(p *corev1.Pod) []any {
				url, err := targets.Endpoint(p)
				batch, hasBatch := targets.MaxBatchSize(p)
				server, serverErr := targets.ForcedServer(p, nil)
				door, isDoor := targets.FrontDoorFor(p)
				return []any{targets.IsRunning(p), targets.IsReady(p), url, err == nil, batch, hasBatch,
					server.String(), fmt.Sprint(serverErr), door, isDoor, p.Annotations[targets.AnnotationScrape],
					trust.Trusted(p), p.Spec.NodeName, p.Spec.HostNetwork, p.UID, p.ResourceVersion, p.CreationTimestamp, labels.Set(p.Labels).String()}
			}
			if diff := cmp.Diff(derive(full), derive(slim)); diff != "" {
				t.Errorf("derived from the slim pod differs (-full +slim):\n%s", diff)
			}
		})
	}
}

// stripPod is the transform before slimPod: it cleared the largest fields
// of the decoded pod in place. Kept to compare the two.
func stripPod(obj interface{}) (interface{}, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
		p.Spec.Volumes = nil
		p.Spec.InitContainers = nil
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Env, c.EnvFrom, c.VolumeMounts, c.Command, c.Args = nil, nil, nil, nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil
		}
		p.Status.ContainerStatuses = nil
		p.Status.InitContainerStatuses = nil
	}
	return obj, nil
}

// BenchmarkPodCache reports the heap a cached pod holds after each
// transform (B/pod), for pods decoded from protobuf as the informer
// decodes them. Run both in one go and compare: -bench PodCache.
func BenchmarkPodCache(b *testing.B) {
	const pods = 2000
	wire := make([][]byte, pods)
	for i := range wire {
		var err error
		if wire[i], err = fullPod(i).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name      string
		transform cache.TransformFunc
	}{{"none", func(o interface{}) (interface{}, error) { return o, nil }}, {"strip", stripPod}, {"slim, nothing shared", func(o interface{}) (interface{}, error) { return newSharedParts().slimPod(o) }}, {"slim", newSharedParts().slimPod}} {
		b.Run(bc.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				kept := make([]interface{}, pods)
				before := heapInUse()
				for i, w := range wire {
					p := &corev1.Pod{}
					if err := p.Unmarshal(w); err != nil {
						b.Fatal(err)
					}
					var err error
					if kept[i], err = bc.transform(p); err != nil {
						b.Fatal(err)
					}
				}
				perPod = float64(heapInUse()-before) / pods
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestPodListersAllNamespaces: with --namespaces the pods come from one
// lister per namespace; a question across all namespaces (namespace "", as
// `kubectl get --raw /apis/custom.metrics.k8s.io/v1beta2/pods/*/…` asks)
// must see the pods of every watched namespace, as the single lister of an
// all-namespaces adapter does, not none.
func TestPodListersAllNamespaces(t *testing.T) {
	lister := func(pods ...*corev1.Pod) corelisters.PodLister {
		idx := emptyIndexer()
		for _, p := range pods {
			if err := idx.Add(p); err != nil {
				t.Fatal(err)
			}
		}
		return corelisters.NewPodLister(idx)
	}
	pod := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
	}
	m := podListers{"a": lister(pod("a", "p1"), pod("a", "p2")), "b": lister(pod("b", "p3"))}
	tests := []struct {
		name string
		ns   string
		sel  labels.Selector
		want []string
	}{
		{"one namespace", "a", labels.Everything(), []string{"a/p1", "a/p2"}},
		{"unwatched namespace", "c", labels.Everything(), nil},
		{"all namespaces", metav1.NamespaceAll, labels.Everything(), []string{"a/p1", "a/p2", "b/p3"}},
		{"all namespaces, a selector", metav1.NamespaceAll, labels.SelectorFromSet(labels.Set{"app": "p3"}), []string{"b/p3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := m.Pods(tc.ns).List(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Namespace+"/"+p.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Pods(%q).List(%s) = %v, want %v", tc.ns, tc.sel, got, tc.want)
			}
		})
	}
	if _, err := m.Pods(metav1.NamespaceAll).Get("p1"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a pod without its namespace: %v, want NotFound", err)
	}
}
