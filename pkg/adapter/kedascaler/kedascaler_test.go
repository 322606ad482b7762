// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/kedascaler"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/provider"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

const model = "llama-3.1-8b-instruct"

// vllmPage is a vLLM v1 /metrics page in the shape of
// pkg/adapter/parse/testdata/vllm-v1.prom, with the given queue, batch and KV use.
func vllmPage(waiting, running int, kv float64) string {
	return fmt.Sprintf(`# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name=%[1]q} %[3]d.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name=%[1]q} %[2]d.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name=%[1]q} %[4]g
`, model, waiting, running, kv)
}

// env is a scaler on 127.0.0.1 over the real provider and a store filled by
// real scrapes of model-server pages served on 127.0.0.1.
type env struct {
	client pb.ExternalScalerClient
	reg    *prometheus.Registry
}

type fakePod struct {
	ns, name    string
	labels      map[string]string
	annotations map[string]string
	page        string // "" : the page answers 500
	scraped     bool   // false: never scraped
	stale       bool   // scraped a minute before now
}

// newScaler returns a scaler over pods and deps, whose pages have been
// scraped (or not) as each fakePod says.
func newScaler(t *testing.T, pods []fakePod, deps []*appsv1.Deployment) *kedascaler.Scaler {
	t.Helper()
	return newScalerWith(t, openConfig(), pods, deps)
}

// openConfig is the scaler's configuration in tests that are not about who
// may call: callers without a client certificate may ask about any
// namespace.
func openConfig() kedascaler.Config {
	return kedascaler.Config{StreamInterval: time.Second, Access: kedascaler.Access{AllowUnauthenticated: true}}
}

// newScalerWith is newScaler with the scaler's configuration cfg.
func newScalerWith(t *testing.T, scfg kedascaler.Config, pods []fakePod, deps []*appsv1.Deployment) *kedascaler.Scaler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	mux := http.NewServeMux()
	for _, p := range pods {
		mux.HandleFunc("/"+p.ns+"/"+p.name+"/metrics", func(w http.ResponseWriter, _ *http.Request) {
			if p.page == "" {
				http.Error(w, "engine dead", http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, p.page)
		})
	}
	pages := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(pages.Close)

	now := time.Now()
	st := store.New()
	cfg := scrape.DefaultConfig()
	mgr, err := scrape.NewManager(cfg, st, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var targets []scrape.Target
	pi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	di := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		pod := runningPod(p.ns, p.name, p.labels)
		pod.Annotations = p.annotations
		if err := pi.Add(pod); err != nil {
			t.Fatal(err)
		}
		key := types.NamespacedName{Namespace: p.ns, Name: p.name}
		switch {
		case p.stale:
			pg, err := parse.NewParser().ParseAs([]byte(p.page), parse.VLLMV1)
			if err != nil {
				t.Fatal(err)
			}
			st.Record(key, now.Add(-time.Minute), pg, nil)
		case p.scraped:
			targets = append(targets, scrape.Target{Pod: key, URL: pages.URL + "/" + p.ns + "/" + p.name + "/metrics"})
		}
	}
	for _, d := range deps {
		if err := di.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	mgr.ScrapeNow(sctx, targets)
	scancel()

	prov := provider.New(provider.Config{MaxAge: 15 * time.Second, Window: 5 * time.Second},
		provider.Listers{
			Pods:         corelisters.NewPodLister(pi),
			Deployments:  appslisters.NewDeploymentLister(di),
			StatefulSets: appslisters.NewStatefulSetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		}, st, nil, testclock.NewFakePassiveClock(now.Add(time.Second)))

	return kedascaler.New(scfg, prov, prov.External())
}

// listenAndServe opens the scaler's port on 127.0.0.1 (TLS with tlsCfg,
// plaintext when nil) and serves it until the test ends.
func listenAndServe(t *testing.T, tlsCfg *tls.Config, scaler *kedascaler.Scaler, reg prometheus.Registerer, opts ...kedascaler.Option) *kedascaler.Server {
	t.Helper()
	srv, err := kedascaler.Listen("127.0.0.1:0", tlsCfg, scaler, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return srv
}

// serve serves scaler on 127.0.0.1 in plaintext until the test ends.
func serve(t *testing.T, scaler *kedascaler.Scaler) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	srv := listenAndServe(t, nil, scaler, reg)

	conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &env{client: pb.NewExternalScalerClient(conn), reg: reg}
}

func runningPod(ns, name string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

func deployment(ns, name string, lbls map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: lbls}},
	}
}

// frontDoorPage is llm-d's endpoint picker's page holding held requests in
// its flow-control queue, with 3 requests in flight and a pool saturation
// of 0.5, under the current names and (with other values, which must not
// count) the deprecated ones.
func frontDoorPage(held int) string {
	return fmt.Sprintf(`# TYPE inference_extension_flow_control_queue_size gauge
inference_extension_flow_control_queue_size{fairness_id="default",inference_pool="pool",model_name="m",priority="0",target_model_name="m"} 99
# TYPE inference_objective_running_requests gauge
inference_objective_running_requests{model_name="m"} 99
# TYPE inference_extension_flow_control_pool_saturation gauge
inference_extension_flow_control_pool_saturation{inference_pool="pool"} 0.99
# TYPE llm_d_epp_flow_control_queue_size gauge
llm_d_epp_flow_control_queue_size{fairness_id="default",inference_pool="pool",model_name="m",priority="0",target_model_name="m"} %d
# TYPE llm_d_epp_request_running gauge
llm_d_epp_request_running{fairness_id="default",model_name="m",priority="0",target_model_name="m"} 3
# TYPE llm_d_epp_flow_control_pool_saturation gauge
llm_d_epp_flow_control_pool_saturation{inference_pool="pool",stage="effective"} 0.5
`, held)
}

// fleet: team-a runs Deployment llm (pods a1, a2: queues 3 and 4), an idle
// Deployment quiet, a Deployment cold whose pod was never scraped, one
// whose scrape failed (broken) and one scraped a minute ago (old), and a
// front door (fd1, holding 6 requests) for Service asleep, whose model
// Deployment is at zero replicas; team-b runs its own llm (pod b1: queue 9).
func fleet(t *testing.T) *env { return serve(t, fleetScaler(t)) }

func fleetScaler(t *testing.T) *kedascaler.Scaler { return fleetScalerWith(t, openConfig()) }

// fleetScalerWith is fleetScaler with the scaler's configuration cfg.
func fleetScalerWith(t *testing.T, cfg kedascaler.Config) *kedascaler.Scaler {
	llm := map[string]string{"app": "llm"}
	return newScalerWith(t, cfg, []fakePod{
		{ns: "team-a", name: "a1", labels: llm, page: vllmPage(3, 8, 0.25), scraped: true},
		{ns: "team-a", name: "a2", labels: llm, page: vllmPage(4, 8, 0.5), scraped: true},
		{ns: "team-a", name: "q1", labels: map[string]string{"app": "quiet"}, page: vllmPage(0, 0, 0), scraped: true},
		{ns: "team-a", name: "c1", labels: map[string]string{"app": "cold"}, page: vllmPage(5, 1, 0.1)},
		{ns: "team-a", name: "x1", labels: map[string]string{"app": "broken"}, scraped: true},
		{ns: "team-a", name: "o1", labels: map[string]string{"app": "old"}, page: vllmPage(6, 1, 0.1), stale: true},
		{ns: "team-b", name: "b1", labels: llm, page: vllmPage(9, 8, 0.75), scraped: true},
		{ns: "team-a", name: "fd1", labels: map[string]string{"app": "router"}, annotations: map[string]string{"inference-metrics-adapter/front-door-for": "asleep"}, page: frontDoorPage(6), scraped: true},
		{ns: "team-a", name: "pd-prefill", labels: map[string]string{"app": "pd", "llm-d.ai/role": "prefill"}, page: vllmPage(2, 1, 0.1), scraped: true},
		{ns: "team-a", name: "pd-decode", labels: map[string]string{"app": "pd", "llm-d.ai/role": "decode"}, page: vllmPage(5, 8, 0.9), scraped: true},
	}, []*appsv1.Deployment{
		deployment("team-a", "pd", map[string]string{"app": "pd"}),
		deployment("team-a", "llm", llm),
		deployment("team-a", "quiet", map[string]string{"app": "quiet"}),
		deployment("team-a", "cold", map[string]string{"app": "cold"}),
		deployment("team-a", "broken", map[string]string{"app": "broken"}),
		deployment("team-a", "old", map[string]string{"app": "old"}),
		deployment("team-b", "llm", llm),
	})
}

func ref(ns string, md map[string]string) *pb.ScaledObjectRef {
	return &pb.ScaledObjectRef{Name: "so", Namespace: ns, ScalerMetadata: md}
}

func md(kv ...string) map[string]string {
	m := map[string]string{"scalerAddress": "inference-metrics-adapter.monitoring.svc:9090"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestGetMetricsAndIsActive(t *testing.T) {
	e := fleet(t)
	tests := []struct {
		name       string
		ns         string
		md         map[string]string
		want       float64
		wantActive bool
		wantCode   codes.Code
		wantMsg    string
	}{
		{name: "deployment queue is the sum over its pods", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"), want: 7, wantActive: true},
		{name: "pod selector queue", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=llm"), want: 7, wantActive: true},
		{name: "activation threshold not passed", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "activationTargetValue", "7"), want: 7, wantActive: false},
		{name: "fraction is the max over pods", ns: "team-a", md: md("metricName", "inference_kv_cache_usage", "targetValue", "0.8", "deployment", "llm"), want: 0.5, wantActive: true},
		{name: "model filter", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "modelName", model), want: 7, wantActive: true},
		{name: "other model has no value", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "modelName", "other"), wantCode: codes.NotFound},
		{name: "idle is a measured zero", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "quiet"), want: 0, wantActive: false},
		{name: "never scraped is not zero", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "cold"), wantCode: codes.NotFound, wantMsg: "1 not scraped yet"},
		{name: "failed scrape is not zero", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "broken"), wantCode: codes.NotFound, wantMsg: "1 scrape failed"},
		{name: "stale scrape is not zero", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=old"), wantCode: codes.NotFound, wantMsg: "stale"},
		{name: "no such deployment", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "nope"), wantCode: codes.NotFound},
		{name: "no pods match", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=nope"), wantCode: codes.NotFound},
		// Tenant isolation: the same metadata in another namespace reads that namespace only.
		{name: "team-b deployment of the same name", ns: "team-b", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"), want: 9, wantActive: true},
		{name: "team-b selector sees only team-b pods", ns: "team-b", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=llm"), want: 9, wantActive: true},
		{name: "team-b cannot read team-a's quiet deployment", ns: "team-b", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "quiet"), wantCode: codes.NotFound},
		{name: "team-b cannot read team-a's pods by selector", ns: "team-b", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=quiet"), wantCode: codes.NotFound},
		// A Service's front door: the signal that exists at zero replicas.
		{name: "service front door held requests", ns: "team-a", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "10", "service", "asleep"), want: 6, wantActive: true},
		{name: "service without a front door is not zero", ns: "team-a", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "10", "service", "llm"), wantCode: codes.NotFound},
		{name: "team-b cannot read team-a's front door", ns: "team-b", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "10", "service", "asleep"), wantCode: codes.NotFound},
		{name: "service front door in-flight requests (current name)", ns: "team-a", md: md("metricName", "inference_front_door_running_requests", "targetValue", "10", "service", "asleep"), want: 3, wantActive: true},
		{name: "service front door pool saturation (current name)", ns: "team-a", md: md("metricName", "inference_front_door_pool_saturation", "targetValue", "0.8", "service", "asleep"), want: 0.5, wantActive: true},
		// Disaggregated prefill/decode: one Deployment, each role asked apart.
		{name: "prefill's waiting requests", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "pd", "role", "prefill"), want: 2, wantActive: true},
		{name: "decode's running requests", ns: "team-a", md: md("metricName", "inference_batch_size", "targetValue", "5", "deployment", "pd", "role", "decode"), want: 8, wantActive: true},
		{name: "both roles without one", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "pd"), want: 7, wantActive: true},
		{name: "a role by pod selector", ns: "team-a", md: md("metricName", "inference_kv_cache_usage", "targetValue", "0.8", "podSelector", "app=pd", "role", "prefill"), want: 0.1, wantActive: true},
		// The demand forecast is read as the demand is; this adapter's
		// clock stands still, so its history never spans enough.
		{name: "demand forecast: absent while its history is short", ns: "team-a", md: md("metricName", "inference_demand_forecast_per_replica", "targetValue", "5", "deployment", "llm"), wantCode: codes.NotFound, wantMsg: "needs at least 3"},
		{name: "demand forecast of a model no pod serves", ns: "team-a", md: md("metricName", "inference_demand_forecast_per_replica", "targetValue", "5", "deployment", "llm", "modelName", "other"), wantCode: codes.NotFound, wantMsg: "the history holds 0 samples"},
		{name: "a role no pod has", ns: "team-a", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "pd", "role", "encode"), wantCode: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := ref(tt.ns, tt.md)
			got, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: tt.md["metricName"]})
			active, aerr := e.client.IsActive(ctx, r)
			if tt.wantCode != codes.OK {
				for what, err := range map[string]error{"GetMetrics": err, "IsActive": aerr} {
					if status.Code(err) != tt.wantCode || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
						t.Errorf("%s: err %v, want code %s with %q", what, err, tt.wantCode, tt.wantMsg)
					}
				}
				if got != nil || active != nil {
					t.Errorf("got values %v, %v with the error", got, active)
				}
				return
			}
			if err != nil || aerr != nil {
				t.Fatalf("GetMetrics: %v; IsActive: %v", err, aerr)
			}
			if len(got.MetricValues) != 1 {
				t.Fatalf("got %d values, want 1: %v", len(got.MetricValues), got)
			}
			v := got.MetricValues[0]
			if v.MetricName != tt.md["metricName"] || v.MetricValueFloat != tt.want || v.MetricValue != int64(tt.want+0.5) {
				t.Errorf("got %s = %v (int %d), want %s = %v", v.MetricName, v.MetricValueFloat, v.MetricValue, tt.md["metricName"], tt.want)
			}
			if active.Result != tt.wantActive {
				t.Errorf("IsActive = %v, want %v", active.Result, tt.wantActive)
			}
		})
	}
}

func TestGetMetricSpec(t *testing.T) {
	e := fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := e.client.GetMetricSpec(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "2.5", "deployment", "llm")))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.MetricSpecs) != 1 {
		t.Fatalf("got %d specs: %v", len(got.MetricSpecs), got)
	}
	s := got.MetricSpecs[0]
	if s.MetricName != "inference_queue_size" || s.TargetSizeFloat != 2.5 || s.TargetSize != 3 {
		t.Errorf("got %v, want inference_queue_size with target 2.5 (3 as an integer)", s)
	}
	// The spec needs no value: a workload without one still gets its spec.
	if _, err := e.client.GetMetricSpec(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "cold"))); err != nil {
		t.Errorf("spec of an unmeasured workload: %v", err)
	}
}

func TestMetadataValidation(t *testing.T) {
	e := fleet(t)
	long := strings.Repeat("a", 1100)
	many := map[string]string{}
	for i := range 40 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	var reqs []string
	for i := range 20 {
		reqs = append(reqs, fmt.Sprintf("l%d=v", i))
	}
	tests := []struct {
		name    string
		ns      string
		md      map[string]string
		wantMsg string
	}{
		{name: "no namespace", ns: "", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"), wantMsg: "no namespace"},
		{name: "no metric", md: md("targetValue", "5", "deployment", "llm"), wantMsg: "metricName is required"},
		{name: "unknown metric", md: md("metricName", "vllm:num_requests_waiting", "targetValue", "5", "deployment", "llm"), wantMsg: "not a served metric"},
		{name: "no target", md: md("metricName", "inference_queue_size", "deployment", "llm"), wantMsg: "targetValue is required"},
		{name: "zero target", md: md("metricName", "inference_queue_size", "targetValue", "0", "deployment", "llm"), wantMsg: "must be positive"},
		{name: "NaN target", md: md("metricName", "inference_queue_size", "targetValue", "NaN", "deployment", "llm"), wantMsg: "not a finite number"},
		{name: "text target", md: md("metricName", "inference_queue_size", "targetValue", "five", "deployment", "llm"), wantMsg: "not a finite number"},
		{name: "negative activation", md: md("metricName", "inference_queue_size", "targetValue", "5", "activationTargetValue", "-1", "deployment", "llm"), wantMsg: "must not be negative"},
		{name: "no workload", md: md("metricName", "inference_queue_size", "targetValue", "5"), wantMsg: "exactly one of"},
		{name: "two workloads", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "podSelector", "app=llm"), wantMsg: "exactly one of"},
		{name: "bad deployment name", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "LLM_1"), wantMsg: "not a valid name"},
		{name: "bad selector", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app in (llm"), wantMsg: "podSelector"},
		{name: "empty selector", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", ""), wantMsg: "must pick pods"},
		{name: "model in selector", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app=llm,model_name=x"), wantMsg: "modelName"},
		{name: "too many requirements", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", strings.Join(reqs, ",")), wantMsg: "more than 16"},
		{name: "value too long", md: md("metricName", "inference_queue_size", "targetValue", "5", "podSelector", "app="+long), wantMsg: "more than 1024"},
		{name: "too many keys", md: many, wantMsg: "more than 32"},
		{name: "misspelt key", md: md("metricName", "inference_queue_size", "targetvalue", "5", "deployment", "llm"), wantMsg: `unknown metadata key "targetvalue"`},
		{name: "key set twice", md: md("metricName", "inference_queue_size", "targetValue", "5", "targetValueFromEnv", "6", "deployment", "llm"), wantMsg: "both directly and through"},
		{name: "bad model name", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "modelName", "a b"), wantMsg: "modelName"},
		{name: "model name with a slash", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm", "modelName", "meta-llama/Llama-3.1-8B-Instruct"), wantMsg: "--served-model-name"},
		{name: "front door on a deployment", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "5", "deployment", "llm"), wantMsg: "served on a Service"},
		{name: "pod metric on a service", md: md("metricName", "inference_queue_size", "targetValue", "5", "service", "asleep"), wantMsg: "serves only inference_front_door_pending_requests"},
		{name: "demand per replica by selector", md: md("metricName", "inference_demand_per_replica", "targetValue", "5", "podSelector", "app=llm"), wantMsg: "Deployment or StatefulSet"},
		{name: "demand forecast by selector", md: md("metricName", "inference_demand_forecast_per_replica", "targetValue", "5", "podSelector", "app=llm"), wantMsg: "Deployment or StatefulSet"},
		{name: "demand forecast on a service", md: md("metricName", "inference_demand_forecast_per_replica", "targetValue", "5", "service", "asleep"), wantMsg: "serves only"},
		{name: "model on a service", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "5", "service", "asleep", "modelName", "m"), wantMsg: "does not apply"},
		{name: "bad service name", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "5", "service", "Asleep!"), wantMsg: "not a valid name"},
		{name: "bad role", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "pd", "role", "pre fill"), wantMsg: "role"},
		{name: "empty role", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "pd", "role", ""), wantMsg: "role"},
		{name: "role on a service", md: md("metricName", "inference_front_door_pending_requests", "targetValue", "5", "service", "asleep", "role", "prefill"), wantMsg: "does not apply"},
		{name: "front-door saturation on a deployment", md: md("metricName", "inference_front_door_pool_saturation", "targetValue", "5", "deployment", "llm"), wantMsg: "served on a Service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.ns
			if ns == "" && tt.name != "no namespace" {
				ns = "team-a"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := ref(ns, tt.md)
			_, err1 := e.client.GetMetricSpec(ctx, r)
			_, err2 := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r})
			_, err3 := e.client.IsActive(ctx, r)
			stream, err := e.client.StreamIsActive(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			_, err4 := stream.Recv()
			for i, err := range []error{err1, err2, err3, err4} {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
					t.Errorf("call %d: got %v, want InvalidArgument with %q", i, err, tt.wantMsg)
				}
			}
		})
	}
	// KEDA's <key>FromEnv, resolved by KEDA, stands for <key>.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := e.client.GetMetricSpec(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValueFromEnv", "7", "deployment", "llm")))
	if err != nil || got.MetricSpecs[0].TargetSizeFloat != 7 {
		t.Errorf("targetValueFromEnv: got %v, %v; want target 7", got, err)
	}
}

func TestGetMetricsRefusesAnotherMetricName(t *testing.T) {
	e := fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.client.GetMetrics(ctx, &pb.GetMetricsRequest{
		ScaledObjectRef: ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm")),
		MetricName:      "inference_batch_size",
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("got %v, want InvalidArgument", err)
	}
}

func TestStreamIsActive(t *testing.T) {
	e := fleet(t)
	tests := []struct {
		name     string
		md       map[string]string
		want     bool
		wantCode codes.Code
	}{
		{name: "busy", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm"), want: true},
		{name: "idle", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "quiet"), want: false},
		{name: "unmeasured ends the stream", md: md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "cold"), wantCode: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := e.client.StreamIsActive(ctx, ref("team-a", tt.md))
			if err != nil {
				t.Fatal(err)
			}
			got, err := stream.Recv()
			if tt.wantCode != codes.OK {
				if status.Code(err) != tt.wantCode {
					t.Fatalf("got %v, %v; want %s", got, err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Result != tt.want {
				t.Errorf("first push %v, want %v", got.Result, tt.want)
			}
			// The value does not change: nothing more is pushed, and the
			// stream ends when the client cancels.
			cancel()
			if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
				t.Errorf("after cancel: %v, want Canceled", err)
			}
		})
	}
}

func TestRequestsCounted(t *testing.T) {
	e := fleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = e.client.IsActive(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "llm")))
	_, _ = e.client.IsActive(ctx, ref("team-a", md("metricName", "inference_queue_size", "targetValue", "5", "deployment", "cold")))
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var lbl []string
			for _, l := range m.GetLabel() {
				lbl = append(lbl, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(lbl, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	for _, k := range []string{
		"inference_metrics_adapter_keda_scaler_requests_total{code=OK,method=/externalscaler.ExternalScaler/IsActive}",
		"inference_metrics_adapter_keda_scaler_requests_total{code=NotFound,method=/externalscaler.ExternalScaler/IsActive}",
	} {
		if got[k] != 1 {
			t.Errorf("%s = %v, want 1 (all: %v)", k, got[k], got)
		}
	}
}
