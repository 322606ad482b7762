// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/targets"
)

// tenantBlob fills about n bytes of what a tenant may write into a
// workload or a pod that the adapter never reads: a last-applied
// annotation (the API server caps all annotations at 256 KiB) and, for the
// rest, environment variables of a container. A Deployment, StatefulSet or
// pod may be about 1.5 MiB in all (etcd's request limit).
func tenantBlob(n int) (annotation string, env []corev1.EnvVar) {
	ann := min(n/4, 200<<10)
	annotation = strings.Repeat("a", ann)
	for rest := n - ann; rest > 0; rest -= 1024 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("E%d", rest), Value: strings.Repeat("v", min(rest, 1024))})
	}
	return annotation, env
}

// tenantTemplate is a pod template carrying about blob bytes of env.
func tenantTemplate(env []corev1.EnvVar) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "vllm", "team": "a"},
			Annotations: map[string]string{targets.AnnotationScrape: "true", targets.AnnotationMaxBatchSize: "256"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm", Image: "vllm/vllm-openai:v0.11.0", Env: env,
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}
}

func tenantMeta(name string, annotation string) metav1.ObjectMeta {
	now := metav1.NewTime(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))
	return metav1.ObjectMeta{
		Name: name, Namespace: "inference", UID: types.UID("uid-" + name), ResourceVersion: "4242", Generation: 7,
		CreationTimestamp: now,
		Labels:            map[string]string{"app": "vllm", "team": "a"},
		Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": annotation, "deployment.kubernetes.io/revision": "3"},
		Finalizers:        []string{"example.com/keep"},
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}},
	}
}

func tenantSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "vllm"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}},
	}
}

// fullDeployment is a Deployment as the API server sends it, with about
// blob bytes that the adapter does not read, and replicas: 0.
func fullDeployment(name string, blob int) *appsv1.Deployment {
	ann, env := tenantBlob(blob)
	zero := int32(0)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: tenantMeta(name, ann),
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero, Selector: tenantSelector(), Template: tenantTemplate(env),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 7, Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "ok"}},
		},
	}
}

// fullStatefulSet is fullDeployment's StatefulSet.
func fullStatefulSet(name string, blob int) *appsv1.StatefulSet {
	ann, env := tenantBlob(blob)
	zero := int32(0)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{Kind: "StatefulSet", APIVersion: "apps/v1"},
		ObjectMeta: tenantMeta(name, ann),
		Spec: appsv1.StatefulSetSpec{
			Replicas: &zero, Selector: tenantSelector(), Template: tenantTemplate(env), ServiceName: name,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "models"}}},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 7, Replicas: 2, ReadyReplicas: 1, CurrentRevision: name + "-5d4c"},
	}
}

// bigPod is fullPod(i) carrying about blob bytes the adapter does not read.
func bigPod(i, blob int) *corev1.Pod {
	ann, env := tenantBlob(blob)
	p := fullPod(i)
	p.Name = fmt.Sprintf("vllm-%d", i)
	p.UID = types.UID(fmt.Sprintf("uid-%d", i))
	p.Labels = map[string]string{"app": "vllm", "replica": fmt.Sprint(i)}
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = ann
	p.Spec.Containers[1].Env = env
	return p
}

// TestInformerTransformsKeepOnlyWhatIsRead: each informer's transform keeps
// of its objects exactly the fields the adapter reads, also inside a
// tombstone, passes other objects through unchanged, and gives the same
// object again when given its own output (client-go asks transforms to be
// idempotent).
func TestInformerTransformsKeepOnlyWhatIsRead(t *testing.T) {
	dep, set := fullDeployment("vllm", 64<<10), fullStatefulSet("tgi", 64<<10)
	slimMeta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	}
	wantDep := &appsv1.Deployment{TypeMeta: dep.TypeMeta, ObjectMeta: slimMeta(dep.ObjectMeta), Spec: appsv1.DeploymentSpec{Selector: tenantSelector()}}
	wantSet := &appsv1.StatefulSet{TypeMeta: set.TypeMeta, ObjectMeta: slimMeta(set.ObjectMeta), Spec: appsv1.StatefulSetSpec{Selector: tenantSelector()}}

	pod := bigPod(0, 64<<10)
	pod.Annotations[targets.AnnotationPort] = "8001"
	pod.Annotations["example.com/note"] = "not read"
	wantPod := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion, Labels: pod.Labels,
			Annotations:     map[string]string{targets.AnnotationScrape: "true", targets.AnnotationMaxBatchSize: "256", targets.AnnotationPort: "8001"},
			OwnerReferences: pod.OwnerReferences, CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-3", Containers: []corev1.Container{{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "metrics", ContainerPort: 8001}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.3.17", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: pod.Status.Conditions[3].LastTransitionTime}}},
	}
	unread := fullPod(1)
	unread.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now", "example.com/note": "x"}
	wantUnread := newSharedParts().mustSlim(t, fullPod(1))
	wantUnread.Annotations = nil

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "inference", Annotations: map[string]string{"a": "b"}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "inference", Annotations: map[string]string{"a": "b"}}}
	tomb := func(obj interface{}) cache.DeletedFinalStateUnknown {
		return cache.DeletedFinalStateUnknown{Key: "inference/x", Obj: obj}
	}

	pods := newSharedParts().slimPod
	tests := []struct {
		name      string
		transform cache.TransformFunc
		in, want  interface{}
	}{
		{"deployment", slimDeployment, dep.DeepCopy(), wantDep},
		{"statefulset", slimStatefulSet, set.DeepCopy(), wantSet},
		{"pod", pods, pod.DeepCopy(), wantPod},
		{"pod without an annotation the adapter reads", pods, unread.DeepCopy(), wantUnread},
		{"tombstone of a deployment", slimDeployment, tomb(dep.DeepCopy()), tomb(wantDep)},
		{"tombstone of a statefulset", slimStatefulSet, tomb(set.DeepCopy()), tomb(wantSet)},
		{"tombstone of a pod", pods, tomb(pod.DeepCopy()), tomb(wantPod)},
		{"tombstone without an object", slimDeployment, tomb(nil), tomb(nil)},
		{"deployment transform, a service", slimDeployment, svc, svc},
		{"statefulset transform, a replicaset", slimStatefulSet, rs, rs},
		{"pod transform, a deployment", pods, dep, dep},
		{"deployment transform, a pod", slimDeployment, pod, pod},
		{"statefulset transform, a deployment", slimStatefulSet, dep, dep},
		{"pod transform, a tombstone of a service", pods, tomb(svc), tomb(svc)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.transform(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("transformed (-want +got):\n%s", diff)
			}
			again, err := tc.transform(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("transformed twice (-once +twice):\n%s", diff)
			}
		})
	}
}

func (sp *sharedParts) mustSlim(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	obj, err := sp.slimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.Pod)
}

// annotationsRead names the pod annotations the adapter reads, by the
// constant that the code indexes Annotations with.
func annotationsRead() map[string]string {
	return map[string]string{
		"AnnotationPort":          targets.AnnotationPort,
		"AnnotationPath":          targets.AnnotationPath,
		"AnnotationScrape":        targets.AnnotationScrape,
		"AnnotationServer":        targets.AnnotationServer,
		"AnnotationMaxBatchSize":  targets.AnnotationMaxBatchSize,
		"AnnotationFrontDoor":     targets.AnnotationFrontDoor,
		"AnnotationScheme":        targets.AnnotationScheme,
		"AnnotationTLSServerName": targets.AnnotationTLSServerName,
		"AnnotationScrapeAuth":    targets.AnnotationScrapeAuth,
	}
}

// objectAnnotationsRead names the annotations the adapter reads of objects
// other than pods, which their own transforms keep: a LeaderWorkerSet's
// serving worker index (slimLWS, TestWatchLeaderWorkerSets).
func objectAnnotationsRead() map[string]bool {
	return map[string]bool{"AnnotationServingWorkerIndex": true}
}

// TestSlimPodKeepsEveryAnnotationTheAdapterReads reads the adapter's code
// for every read of an object's annotations: each must index them with one
// of annotationsRead's constants, and slimPod must keep that annotation. A
// new annotation read elsewhere fails here until the pod transform keeps it
// (podAnnotationsRead) and this table names it.
func TestSlimPodKeepsEveryAnnotationTheAdapterReads(t *testing.T) {
	read := annotationsRead()
	// Packages that never see the adapter's informer caches: the kubectl
	// plugin reads workloads through the API server.
	skip := []string{"pkg/tools/kubectlplugin", "cmd/kubectl-inference"}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, root := range []string{"../../../pkg", "../../../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, "../../../"))
			if d.IsDir() {
				if slices.ContainsFunc(skip, func(s string) bool { return rel == s }) || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.IndexExpr:
					if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Annotations" {
						key := keyName(n.Index)
						if objectAnnotationsRead()[key] {
							return true // not a pod's: slimLWS keeps it
						}
						if _, ok := read[key]; !ok {
							t.Errorf("%s: reads annotation %s, which the pod transform drops: add it to podAnnotationsRead and annotationsRead", fset.Position(n.Pos()), key)
						}
						seen[key] = true
					}
				case *ast.RangeStmt:
					if sel, ok := n.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Annotations" {
						t.Errorf("%s: ranges over all annotations; the pod transform keeps only podAnnotationsRead", fset.Position(n.Pos()))
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "GetAnnotations" {
						t.Errorf("%s: GetAnnotations; the pod transform keeps only podAnnotationsRead", fset.Position(n.Pos()))
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no read of pod annotations found: is the walk looking at the repository?")
	}
	sp := newSharedParts()
	for name, key := range read {
		p := fullPod(0)
		p.Annotations = map[string]string{key: "v", "example.com/unread": "v"}
		if got := sp.mustSlim(t, p).Annotations; !cmp.Equal(got, map[string]string{key: "v"}) {
			t.Errorf("%s (%s): slimPod kept annotations %v, want only it", name, key, got)
		}
	}
}

// keyName is the constant an annotation read indexes with, without its
// package ("targets.AnnotationPort" → "AnnotationPort").
func keyName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.BasicLit:
		return e.Value
	}
	return fmt.Sprintf("%T", e)
}

// wanted records the demand a provider's questions created.
type wanted struct{ asked []string }

func (d *wanted) Want(_ context.Context, ns string, sel labels.Selector, pods []*corev1.Pod) {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	d.asked = append(d.asked, fmt.Sprintf("%s/%s:%v", ns, sel, names))
}

func (d *wanted) WantPod(_ context.Context, pod *corev1.Pod) {
	d.asked = append(d.asked, "pod "+pod.Namespace+"/"+pod.Name)
}

func (d *wanted) Shadowed(types.NamespacedName) (types.NamespacedName, bool) {
	return types.NamespacedName{}, false
}

// TestTransformedCacheAnswersAlike asks a provider over informer caches of
// the objects as the API server sends them, and one over the transformed
// objects, every metric it lists about every object (by name and by
// selector, custom and external): the answers, errors and demand must be
// the same. It holds every code path of the provider that reads a pod, a
// Deployment or a StatefulSet to what the transforms keep.
func TestTransformedCacheAnswersAlike(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const ns = "inference"
	st := store.New()
	record := func(p *corev1.Pod, queue, batch, kv float64) {
		m := parse.Model{Name: "llama"}
		m.Values[catalog.QueueSize], m.Values[catalog.BatchSize], m.Values[catalog.KVCacheUsage] = queue, batch, kv
		m.Has = m.Has.Add(catalog.QueueSize).Add(catalog.BatchSize).Add(catalog.KVCacheUsage)
		st.Record(types.NamespacedName{Namespace: ns, Name: p.Name}, now.Add(-time.Second), &parse.Page{Server: parse.VLLMV1, Models: []parse.Model{m}}, nil)
	}
	pod := func(i int, lbls, ann map[string]string, ready bool) *corev1.Pod {
		p := bigPod(i, 4<<10)
		p.Namespace, p.DeletionTimestamp = ns, nil
		p.Status.PodIP = fmt.Sprintf("10.0.0.%d", i+1)
		p.Labels = lbls
		p.Annotations = map[string]string{"example.com/unread": "x"}
		for k, v := range ann {
			p.Annotations[k] = v
		}
		if !ready {
			p.Status.Conditions[3].Status = corev1.ConditionFalse
		}
		return p
	}
	vllm := map[string]string{"app": "vllm", "team": "a"}
	pods := []*corev1.Pod{
		pod(0, vllm, map[string]string{targets.AnnotationMaxBatchSize: "256", targets.AnnotationScrape: "true"}, true),
		pod(1, vllm, map[string]string{targets.AnnotationMaxBatchSize: "64"}, true),
		pod(2, vllm, nil, false),
		pod(3, map[string]string{"app": "tgi", "team": "b"}, map[string]string{targets.AnnotationServer: "tgi"}, true),
		pod(4, map[string]string{"app": "router"}, map[string]string{targets.AnnotationFrontDoor: "svc"}, true),
		pod(5, map[string]string{"app": "epp"}, map[string]string{targets.AnnotationFrontDoor: targets.FrontDoorPoolPrefix + "pool"}, true),
	}
	for i, p := range pods {
		record(p, float64(i+1), float64(2*i), 0.1*float64(i))
	}
	dep, set := fullDeployment("vllm", 4<<10), fullStatefulSet("tgi", 4<<10)
	set.Labels = map[string]string{"app": "tgi", "team": "b"}
	set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tgi"}}
	router := fullDeployment("router", 1<<10)
	router.Labels, router.Spec.Selector = map[string]string{"app": "router"}, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "router"}}
	empty := fullDeployment("everything", 1<<10)
	empty.Labels, empty.Spec.Selector = map[string]string{"app": "odd"}, &metav1.LabelSelector{}

	build := func(slim bool) (*provider.Provider, *wanted) {
		sp := newSharedParts()
		pi, di, si := emptyIndexer(), emptyIndexer(), emptyIndexer()
		add := func(idx cache.Indexer, transform cache.TransformFunc, obj interface{}) {
			if slim {
				var err error
				if obj, err = transform(obj); err != nil {
					t.Fatal(err)
				}
			}
			if err := idx.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pods {
			add(pi, sp.slimPod, p.DeepCopy())
		}
		for _, d := range []*appsv1.Deployment{dep, router, empty} {
			add(di, slimDeployment, d.DeepCopy())
		}
		add(si, slimStatefulSet, set.DeepCopy())
		d := &wanted{}
		return provider.New(provider.Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
			provider.Listers{Pods: corelisters.NewPodLister(pi), Deployments: appslisters.NewDeploymentLister(di), StatefulSets: appslisters.NewStatefulSetLister(si)},
			st, d, testclock.NewFakePassiveClock(now)), d
	}
	full, fullDemand := build(false)
	slim, slimDemand := build(true)

	render := func(v any, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		b, jerr := json.Marshal(v)
		if jerr != nil {
			t.Fatal(jerr)
		}
		return string(b)
	}
	names := map[string][]string{
		"pods":           {pods[0].Name, pods[2].Name, pods[3].Name, pods[4].Name, "missing"},
		"deployments":    {"vllm", "router", "everything", "missing"},
		"statefulsets":   {"tgi", "missing"},
		"services":       {"svc", "other"},
		"inferencepools": {"pool"},
	}
	selectors := []labels.Selector{labels.Everything(), labels.SelectorFromSet(labels.Set{"app": "vllm"}), labels.SelectorFromSet(labels.Set{"team": "b"}), labels.SelectorFromSet(labels.Set{"app": "router"})}
	ctx := context.Background()
	answered := map[string]int{}
	asked := 0
	check := func(what string, a, b string) {
		t.Helper()
		asked++
		if a != b {
			t.Errorf("%s:\n full: %s\n slim: %s", what, a, b)
		}
		if !strings.HasPrefix(a, "error") {
			answered[strings.Fields(what)[0]]++
		}
	}
	for _, info := range full.ListAllMetrics() {
		for _, name := range names[info.GroupResource.Resource] {
			n := types.NamespacedName{Namespace: ns, Name: name}
			check(fmt.Sprintf("%s %s by name %s", info.GroupResource.Resource, info.Metric, name),
				render(full.GetMetricByName(ctx, n, info, labels.Everything())), render(slim.GetMetricByName(ctx, n, info, labels.Everything())))
		}
		for _, sel := range selectors {
			check(fmt.Sprintf("%s %s by selector %q", info.GroupResource.Resource, info.Metric, sel),
				render(full.GetMetricBySelector(ctx, ns, sel, info, labels.Everything())), render(slim.GetMetricBySelector(ctx, ns, sel, info, labels.Everything())))
		}
	}
	for _, info := range full.External().ListAllExternalMetrics() {
		for _, sel := range selectors[1:] {
			check(fmt.Sprintf("external %s %q", info.Metric, sel),
				render(full.External().GetExternalMetric(ctx, ns, sel, info)), render(slim.External().GetExternalMetric(ctx, ns, sel, info)))
		}
	}
	if diff := cmp.Diff(fullDemand.asked, slimDemand.asked); diff != "" {
		t.Errorf("demand (-full +slim):\n%s", diff)
	}
	// The comparison means something only where there were answers.
	for _, kind := range []string{"pods", "deployments", "statefulsets", "services", "inferencepools", "external"} {
		if answered[kind] == 0 {
			t.Errorf("no question about %s was answered from the full objects: the fixture does not exercise them", kind)
		}
	}
	t.Logf("%d questions, answered: %v", asked, answered)
}

// bigTenantObjects are the tenant-made objects of the memory test and
// benchmark: each about blob bytes, decoded from protobuf as the informer
// decodes them, and the transform its informer has.
func bigTenantObjects(t testing.TB, blob int) []struct {
	name      string
	decode    func(i int) interface{}
	transform cache.TransformFunc
} {
	marshal := func(m interface{ Marshal() ([]byte, error) }) []byte {
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	depWire, setWire, podWire := marshal(fullDeployment("vllm", blob)), marshal(fullStatefulSet("tgi", blob)), marshal(bigPod(0, blob))
	unmarshal := func(b []byte, into interface{ Unmarshal([]byte) error }) {
		if err := into.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
	}
	return []struct {
		name      string
		decode    func(i int) interface{}
		transform cache.TransformFunc
	}{
		{"deployment", func(i int) interface{} {
			d := &appsv1.Deployment{}
			unmarshal(depWire, d)
			d.Name, d.UID = fmt.Sprintf("vllm-%d", i), types.UID(fmt.Sprint(i))
			return d
		}, slimDeployment},
		{"statefulset", func(i int) interface{} {
			s := &appsv1.StatefulSet{}
			unmarshal(setWire, s)
			s.Name, s.UID = fmt.Sprintf("tgi-%d", i), types.UID(fmt.Sprint(i))
			return s
		}, slimStatefulSet},
		{"pod", func(i int) interface{} {
			p := &corev1.Pod{}
			unmarshal(podWire, p)
			p.Name, p.UID, p.Labels["replica"] = fmt.Sprintf("vllm-%d", i), types.UID(fmt.Sprint(i)), fmt.Sprint(i)
			return p
		}, newSharedParts().slimPod},
	}
}

// retainedPerObject is the heap that n objects kept after transform hold,
// per object.
func retainedPerObject(t testing.TB, n int, decode func(i int) interface{}, transform cache.TransformFunc) int64 {
	kept := make([]interface{}, n)
	before := heapInUse()
	for i := range kept {
		var err error
		if kept[i], err = transform(decode(i)); err != nil {
			t.Fatal(err)
		}
	}
	per := (heapInUse() - before) / int64(n)
	runtime.KeepAlive(kept)
	return per
}

// TestInformerCacheRetainsLittleOfBigTenantObjects: a tenant may create
// Deployments, StatefulSets (replicas: 0 costs them nothing) and pods of
// about 1.5 MiB each, mostly of what the adapter never reads (a pod
// template, annotations, managed fields). What the informer caches keep of
// each after its transform must be small (a few KiB: names, labels, the
// selector, the annotations the adapter reads), not the object.
func TestInformerCacheRetainsLittleOfBigTenantObjects(t *testing.T) {
	const (
		objects = 16
		blob    = 1400 << 10
		bound   = 16 << 10 // about 1% of the object
	)
	for _, tc := range bigTenantObjects(t, blob) {
		t.Run(tc.name, func(t *testing.T) {
			per := retainedPerObject(t, objects, tc.decode, tc.transform)
			t.Logf("%d objects of %d KiB: %d bytes retained each", objects, blob>>10, per)
			if per > bound {
				t.Errorf("the cache keeps %d bytes of each %d KiB %s, want at most %d", per, blob>>10, tc.name, bound)
			}
		})
	}
}

// BenchmarkInformerCacheBigTenantObjects reports the heap one cached
// tenant object of about 1.5 MiB holds (B/object), with no transform and
// with the adapter's: 100 Deployments, StatefulSets or pods.
func BenchmarkInformerCacheBigTenantObjects(b *testing.B) {
	const objects, blob = 100, 1500 << 10
	for _, tc := range bigTenantObjects(b, blob) {
		for _, tr := range []struct {
			name      string
			transform cache.TransformFunc
		}{{"none", func(o interface{}) (interface{}, error) { return o, nil }}, {"slim", tc.transform}} {
			b.Run(tc.name+"/"+tr.name, func(b *testing.B) {
				var per int64
				for b.Loop() {
					per = retainedPerObject(b, objects, tc.decode, tr.transform)
				}
				b.ReportMetric(float64(per), "B/object")
			})
		}
	}
}

// TestWatchedCachesSlimObjects: the informers newWatched builds, for all
// namespaces and per namespace, cache their objects through the
// transforms.
func TestWatchedCachesSlimObjects(t *testing.T) {
	for _, namespaces := range [][]string{nil, {"inference"}} {
		t.Run(fmt.Sprint(namespaces), func(t *testing.T) {
			dep, set, pod := fullDeployment("vllm", 64<<10), fullStatefulSet("tgi", 64<<10), bigPod(0, 64<<10)
			client := fake.NewClientset(dep.DeepCopy(), set.DeepCopy(), pod.DeepCopy())
			w, err := newWatched(func(ns string) informers.SharedInformerFactory {
				return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
			}, namespaces)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			for _, f := range w.factories {
				f.Start(ctx.Done())
			}
			t.Cleanup(func() {
				cancel()
				for _, f := range w.factories {
					f.Shutdown()
				}
			})
			if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
				t.Fatal("caches did not sync")
			}
			gotDep, err := w.deployments.Deployments("inference").Get("vllm")
			if err != nil {
				t.Fatal(err)
			}
			gotSet, err := w.statefulsets.StatefulSets("inference").Get("tgi")
			if err != nil {
				t.Fatal(err)
			}
			gotPod, err := w.pods.Pods("inference").Get(pod.Name)
			if err != nil {
				t.Fatal(err)
			}
			wantDep, _ := slimDeployment(dep)
			wantSet, _ := slimStatefulSet(set)
			wantPod, _ := newSharedParts().slimPod(pod)
			for _, c := range []struct {
				name      string
				want, got interface{}
			}{{"deployment", wantDep, gotDep}, {"statefulset", wantSet, gotSet}, {"pod", wantPod, gotPod}} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("cached %s (-slim +cached):\n%s", c.name, diff)
				}
			}
		})
	}
}
