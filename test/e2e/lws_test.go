// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// TestLeaderWorkerSetHPA: an adapter started with --leader-worker-sets
// before the LeaderWorkerSet CRD exists in the real control plane becomes
// ready, answers a LeaderWorkerSet question with a 404 saying the CRD is
// not served yet, and, once the CRD is installed, serves LeaderWorkerSets
// within its --leader-worker-sets-recheck (2s here) without a restart. It
// serves inference_demand_per_replica on a LeaderWorkerSet, counting groups
// (a leader and a worker each, created here as the LWS controller would),
// and kube-controller-manager's HPA on that Object metric scales the LWS
// through its scale subresource while the load on the leaders exceeds one
// group's capacity, and back down to minReplicas once the load is gone
// (with a short scale-down window). It swaps the custom metrics APIService
// to its own adapter, so it does not run in parallel.
func TestLeaderWorkerSetHPA(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd, err := os.ReadFile(filepath.Join("testdata", "leaderworkerset-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const recheck = 2 * time.Second
	_, err = e.ControlPlane.Client.Discovery().ServerResourcesForGroupVersion(framework.LWSGVR.GroupVersion().String())
	absent := err != nil
	a := startLWSAdapter(ctx, t, e, "-lws", "--leader-worker-sets-recheck="+recheck.String())
	if absent {
		checkLWSInstalledLater(ctx, t, e, a, crd, recheck)
	} else {
		t.Logf("the LeaderWorkerSet CRD is already installed (an earlier run in this control plane): the check of installing it after the adapter started is left out")
	}
	if err := framework.InstallCRD(ctx, e.ControlPlane, crd); err != nil {
		t.Fatal(err)
	}
	restore, err := a.ServeCustomMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("point custom metrics back at the suite's adapter: %v", err)
		}
	})

	ns := e.Namespace(t)
	const name = "lws-model"
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1",
		"kind":       "LeaderWorkerSet",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas":             int64(1),
			"leaderWorkerTemplate": map[string]any{"size": int64(2)},
		},
	}}
	if _, err := e.ControlPlane.Dynamic.Resource(framework.LWSGVR).Namespace(ns).Create(ctx, lws, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create LeaderWorkerSet: %v", err)
	}
	player := &framework.LWSPlayer{CP: e.ControlPlane, Namespace: ns, Name: name, Pod: func(group, worker int) *corev1.Pod {
		d := simDeployment(name, 1, "--max-num-seqs=4")
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: d.Spec.Template.Spec}
	}}
	pctx, stopPlayer := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); player.Run(pctx, t.Logf) }()
	t.Cleanup(func() { stopPlayer(); <-done })

	leaders := labels.SelectorFromSet(labels.Set{framework.LWSNameLabel: name, framework.LWSWorkerIndexLabel: "0"})
	if _, err := waitRunningPods(ctx, e.ControlPlane.Client, ns, labels.SelectorFromSet(labels.Set{framework.LWSNameLabel: name}), 2); err != nil {
		t.Fatalf("the first group (a leader and a worker): %v", err)
	}
	// The aggregator switches to the LWS adapter a moment after the
	// APIService is Available: wait for an answer only it gives.
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/leaderworkersets.leaderworkerset.x-k8s.io/" + name + "/" + metricDemandPerReplica
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := e.ControlPlane.Client.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		last = string(body)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return strings.Contains(last, `"kind":"LeaderWorkerSet"`), nil
	}); err != nil {
		t.Fatalf("%s never answered for the LeaderWorkerSet (last: %s)", path, last)
	}
	t.Logf("idle: %s", last)

	// C open requests over N groups: demand per replica C/N; at the target
	// 5 the HPA wants C/5 groups, 4 for C=20 (maxReplicas 4).
	target := resource.MustParse("5")
	hpa := framework.HPA(name, 1, 4, autoscalingv2.MetricSpec{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name},
			Metric:          autoscalingv2.MetricIdentifier{Name: metricDemandPerReplica},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &target},
		},
	}, framework.QuickBehavior(300, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}))
	hpa.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name}
	createHPA(t, e, ns, hpa)

	svc, err := framework.StartServiceProxy(func() []string { return e.Kubelet.Endpoints(ns, leaders) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	l := startLoad(t, svc.URL, 60, 60*time.Second, 20)
	defer l.cancel()

	// Scaled: the HPA set spec.replicas of the LWS to 2 or more, the
	// groups exist (leaders Running), and its status reports the metric.
	var peak int64
	var hpaMetric string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.ControlPlane.Dynamic.Resource(framework.LWSGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		peak = max(peak, replicas)
		h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(h.Status.CurrentMetrics) > 0 && h.Status.CurrentMetrics[0].Object != nil {
			hpaMetric = h.Status.CurrentMetrics[0].Object.Current.Value.String()
		}
		return peak >= 2 && hpaMetric != "", nil
	})
	if err != nil {
		h, _ := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		js, _ := json.Marshal(h.Status)
		t.Fatalf("the HPA did not scale the LeaderWorkerSet (peak spec.replicas %d, metric %q): %v; HPA status %s", peak, hpaMetric, err, js)
	}
	t.Logf("the HPA scaled the LeaderWorkerSet to %d groups; its metric read %s", peak, hpaMetric)
	pods, err := waitRunningPods(ctx, e.ControlPlane.Client, ns, leaders, int(peak))
	if err != nil {
		t.Fatalf("the scaled groups' leaders: %v", err)
	}
	for _, p := range pods {
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "LeaderWorkerSet" {
			t.Errorf("leader %s owners %+v", p.Name, p.OwnerReferences)
		}
	}
	// Under load the answer is the leaders' demand over the groups (Ready
	// and starting), not over the pods: with the load still on it is
	// above 0.
	body, err := e.ControlPlane.Client.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var list struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 || list.Items[0].Value.Sign() <= 0 {
		t.Errorf("under load %s answered %s (%v); want one value above 0", path, body, err)
	}
	t.Logf("loaded, %d groups: %s", peak, body)

	// Scale-down: the load goes away and the scale-down window becomes 5s;
	// the HPA must bring spec.replicas back to minReplicas (1), reading the
	// metric below its target.
	l.stop()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		h.Spec.Behavior = framework.QuickBehavior(5, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 5})
		_, err = e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Update(ctx, h, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("shorten the HPA's scale-down window: %v", err)
	}
	downFrom := time.Now()
	var replicas int64
	hpaMetric = ""
	err = wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.ControlPlane.Dynamic.Resource(framework.LWSGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		replicas, _, _ = unstructured.NestedInt64(got.Object, "spec", "replicas")
		h, err := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		below := false
		if len(h.Status.CurrentMetrics) > 0 && h.Status.CurrentMetrics[0].Object != nil && h.Status.CurrentMetrics[0].Object.Current.Value != nil {
			v := h.Status.CurrentMetrics[0].Object.Current.Value
			hpaMetric = v.String()
			below = v.Cmp(target) < 0
		}
		return replicas == 1 && below, nil
	})
	if err != nil {
		h, _ := e.ControlPlane.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		js, _ := json.Marshal(h.Status)
		t.Fatalf("without load the HPA did not scale the LeaderWorkerSet down from %d to 1 group (spec.replicas %d, metric %q, target %s): %v; HPA status %s", peak, replicas, hpaMetric, target.String(), err, js)
	}
	body, err = e.ControlPlane.Client.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	list.Items = nil
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 || list.Items[0].Value.Cmp(target) >= 0 {
		t.Errorf("unloaded %s answered %s (%v); want one value below the target %s", path, body, err, target.String())
	}
	t.Logf("unloaded: the HPA scaled the LeaderWorkerSet from %d groups to %d in %s, its metric reading %s (target %s); the adapter answers %s", peak, replicas, time.Since(downFrom).Round(time.Second), hpaMetric, target.String(), body)
}

// checkLWSInstalledLater: an adapter started with --leader-worker-sets
// while the LeaderWorkerSet CRD is not installed becomes ready (it watches
// nothing it cannot), answers a LeaderWorkerSet question with a 404 that
// says the CRD is not served yet and when it looks again (no restart
// advice), and logs no failed watch of them; after the CRD is installed
// (crd), the same adapter watches LeaderWorkerSets within recheck plus
// slack: a question about one no longer says they are not watched.
func checkLWSInstalledLater(ctx context.Context, t *testing.T, e *framework.Environment, a *framework.Adapter, crd []byte, recheck time.Duration) {
	t.Helper()
	c, err := a.HTTPClient(e.ControlPlane.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace(t)
	url := a.URL() + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/leaderworkersets.leaderworkerset.x-k8s.io/m/" + metricDemandPerReplica
	ask := func() (int, string) {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	code, body := ask()
	if want := "CRD is not served by the API server"; code != 404 || !strings.Contains(body, want) || !strings.Contains(body, "checks again every "+recheck.String()) || strings.Contains(strings.ToLower(body), "restart") {
		t.Errorf("without the CRD: %s answered %d %s; want a 404 that says %q and that the adapter checks again every %s, without restart advice", url, code, body, want, recheck)
	}
	t.Logf("without the CRD: %d %s", code, body)
	resp, err := c.Get(a.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("without the CRD the adapter's /readyz answers %d", resp.StatusCode)
	}
	if strings.Contains(a.Process.Tail(200), "leaderworkersets") && strings.Contains(a.Process.Tail(200), "Failed to watch") {
		t.Errorf("without the CRD the adapter tries to watch LeaderWorkerSets:\n%s", a.Process.Tail(40))
	}

	if err := framework.InstallCRD(ctx, e.ControlPlane, crd); err != nil {
		t.Fatal(err)
	}
	installed := time.Now()
	limit := recheck + 10*time.Second // a check, the access reviews, the informer's sync
	for {
		code, body = ask()
		if !strings.Contains(body, "not watched") {
			break
		}
		if time.Since(installed) > limit {
			t.Fatalf("%s after the CRD was installed the adapter still answers %d %s; want LeaderWorkerSets watched within %s (--leader-worker-sets-recheck %s)", limit, code, body, limit, recheck)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// No such LeaderWorkerSet yet: a 404 that says so, from the informer.
	if code != 404 || !strings.Contains(body, "not found") {
		t.Errorf("with the CRD installed: %s answered %d %s; want a 404 that LeaderWorkerSet m is not found", url, code, body)
	}
	if !strings.Contains(a.Process.Tail(400), "Watching LeaderWorkerSets") {
		t.Errorf("the adapter's log does not say it watches LeaderWorkerSets:\n%s", a.Process.Tail(40))
	}
	t.Logf("CRD installed after the adapter started: LeaderWorkerSets watched %s later (recheck %s); %d %s", time.Since(installed).Round(100*time.Millisecond), recheck, code, body)
}

// startLWSAdapter starts an adapter with --leader-worker-sets and extra
// flags, registered under no APIService, stopped when t ends.
func startLWSAdapter(ctx context.Context, t *testing.T, e *framework.Environment, suffix string, extra ...string) *framework.Adapter {
	t.Helper()
	a, err := framework.StartAdapter(ctx, e.ControlPlane, framework.AdapterConfig{
		Binary:            e.Adapter.Config().Binary,
		Namespace:         framework.AdapterNamespace,
		Service:           framework.AdapterService + suffix,
		Args:              append(append(framework.AdapterArgs(), "--leader-worker-sets"), extra...),
		SkipCustomMetrics: true,
	})
	if err != nil {
		t.Fatalf("start the LWS adapter: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop the LWS adapter: %v", err)
		}
	})
	return a
}
