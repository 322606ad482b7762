// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The hostile-tenant scenario: a victim namespace runs an ordinary simulated
// vLLM Deployment with an HPA on inference_queue_size; a tenant namespace
// next to it runs pods whose pages are crafted to forge, stall or crash
// what the adapter serves, and a reader in that namespace floods the API
// with questions. Throughout, the victim's values must stay correct and
// its HPA active, and the adapter's memory must stay under the chart's limit.
const (
	// tenantPageImage is an image the kubelet stand-in does not run: the
	// test serves those pods' pages itself, at loopback addresses outside
	// the stand-in's 127.0.x.y range.
	tenantPageImage = "tenant-page"
	tenantPagePort  = 8000
	// tenantAttack is how long the tenant attacks while the victim is watched.
	tenantAttack = 20 * time.Second
	// adapterMemoryLimit is the chart's default memory limit for the adapter.
	adapterMemoryLimit = 512 << 20
	// maxErrorMessage bounds a 404's text: a page's bytes are never quoted whole.
	maxErrorMessage = 4 << 10
)

// hostilePage is one tenant pod and the page its server answers with.
type hostilePage struct {
	name string
	// page writes the page for one request; nil means the server hangs
	// until the request is given up.
	page func(w http.ResponseWriter)
	// refused lists the metrics that must never be served for this pod,
	// and why says what their 404 must mention.
	refused []string
	why     string
}

// TestHostileTenant: a tenant forges GPU values for another namespace's
// pods with a fake gpu-agent, serves pages crafted to exhaust memory (1 MiB
// model names; 64 models of 1 KiB names, past the store's 8 KiB of names
// per pod), pin a core (40,000 models), carry values the HPA must never
// see (1e16, negatives, a KV-cache fraction of 7.5, duplicated series, a
// 1 MiB malformed value), and hang; a reader of the tenant namespace asks
// about hundreds of selectors, without a selector, and about the hanging
// pod many times at once. At the same time the tenant, as a KEDA caller
// with a client certificate granted only its namespace, asks a second
// adapter's KEDA port about the victim's namespace, a thousand selectors
// of its own and a selector of negations only, while KEDA's operator reads
// the victim Deployment there. The victim's HPA and KEDA's operator keep
// reading correct values throughout, the tenant is refused the victim's
// namespace every time, nothing forged or out of range is served, and both
// adapters' peak memory stays under the limit.
func TestHostileTenant(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	victimNS := e.Namespace(t)
	tenantNS := e.Namespace(t)
	c := e.ControlPlane.Client
	admin := e.ControlPlane.Config

	victim := simDeployment("victim", 2, "--max-num-seqs=4")
	victimPods := createSimDeployment(t, e, victimNS, victim, 2)
	victimSel := labels.SelectorFromSet(victim.Spec.Selector.MatchLabels)
	createHPA(t, e, victimNS, newHPA(victim.Name, 2, 4, framework.PodsMetric(metricQueue, "5"), 0))

	// A second adapter serving the KEDA scaler's port, as docs/keda.md sets
	// it up: client certificates of a CA of its own, KEDA's operator
	// granted the victim's namespace and the tenant's certificate only its
	// own. The suite's adapter (whose custom metrics API the victim's HPA
	// reads) has no KEDA port.
	kp := startKEDAAdapter(t, e, framework.AdapterService+"-keda-tenant", "user:keda-operator="+victimNS, "user:tenant="+tenantNS)
	operator := kp.caller(t, "keda-operator")
	attacker := kp.caller(t, "tenant")
	victimRef := &pb.ScaledObjectRef{Name: victim.Name, Namespace: victimNS, ScalerMetadata: map[string]string{
		"metricName": metricQueue, "targetValue": "5", "deployment": victim.Name,
	}}

	// The tenant's pods, each served by this test at 127.1.0.N.
	forged := forgedAgentPage(victimNS, podNames(victimPods))
	pages := []hostilePage{
		{name: "forged-agent", page: func(w http.ResponseWriter) { fmt.Fprint(w, forged) }},
		{name: "huge-model-name", page: hugeModelNamePage, refused: []string{metricQueue}, why: "label size bound"},
		{name: "many-models", page: manyModelsPage, refused: []string{metricQueue}, why: "models bound"},
		{name: "long-model-names", page: longModelNamesPage, refused: []string{metricQueue}, why: "bytes of model names the store keeps per pod"},
		{name: "bad-values", page: badValuesPage, refused: []string{metricBatch, metricKV}, why: "refused as out of range"},
		{name: "huge-value", page: hugeValuePage},
		{name: "duplicates", page: duplicatesPage, refused: []string{metricQueue}, why: "duplicate series"},
		{name: "malformed", page: malformedPage, refused: []string{metricQueue}, why: "invalid value"},
		{name: "hang", refused: []string{metricQueue}, why: "timeout"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agentDS := tenantDaemonSet(ctx, t, e, tenantNS)
	for i, hp := range pages {
		lbls := map[string]string{"app": "tenant", "page": hp.name}
		var owner *metav1.OwnerReference
		if hp.name == "forged-agent" {
			// Labelled like the real agent and controlled by a DaemonSet:
			// only its namespace gives it away.
			key, value, _ := strings.Cut(framework.GPUAgentLabel, "=")
			lbls = map[string]string{key: value}
			owner = metav1.NewControllerRef(agentDS, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
		}
		runTenantPod(ctx, t, e, tenantNS, hp, lbls, owner, fmt.Sprintf("127.1.0.%d", i+2))
	}

	// The victim's values are read as its HPA reads them, with the typed
	// client, each read bounded by 5 s.
	readerConfig := rest.CopyConfig(admin)
	readerConfig.Timeout = 5 * time.Second
	victimReader, err := framework.NewMetricsClient(readerConfig)
	if err != nil {
		t.Fatal(err)
	}
	// The victim is answered before the attack starts.
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vals, err := victimReader.PodValues(ctx, victimNS, metricQueue, victimSel)
		return err == nil && len(vals) == 2, nil
	}); err != nil {
		t.Fatalf("the victim's %s never answered before the attack: %v", metricQueue, err)
	}
	var lastKEDA string
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := checkVictimKEDA(ctx, operator, victimReader, victimRef, nil)
		if err != nil {
			lastKEDA = err.Error()
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the victim's %s never answered on the KEDA port before the attack (last: %s): %v", metricQueue, lastKEDA, err)
	}

	// The attack, and the victim watched through it.
	attackCtx, stopAttack := context.WithTimeout(ctx, tenantAttack)
	defer stopAttack()
	var wg sync.WaitGroup
	var asked atomic.Int64
	tooLong := make(chan string, 1)
	ask := func(path string) {
		_, body, _ := rawGetStatus(attackCtx, admin, path)
		asked.Add(1)
		if len(body) > maxErrorMessage {
			select {
			case tooLong <- fmt.Sprintf("%s: %d bytes: %.200s…", path, len(body), body):
			default:
			}
		}
	}
	attack := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; attackCtx.Err() == nil; i++ {
				f(i)
			}
		}()
	}
	for _, hp := range pages { // every crafted page is wanted, as an HPA on it would want it
		attack(func(int) {
			ask(podMetricsPath(tenantNS, metricQueue, labels.SelectorFromSet(labels.Set{"page": hp.name})))
			time.Sleep(500 * time.Millisecond)
		})
	}
	// The floods pause a little between questions: enough to ask thousands
	// of distinct selectors (the demand bound is 64 per namespace), without
	// taking the 2 cores from the tests that run beside this one.
	for w := range 4 { // a new selector on every question
		attack(func(i int) {
			ask(podMetricsPath(tenantNS, metricQueue, labels.SelectorFromSet(labels.Set{"app": "tenant", "flood": fmt.Sprintf("%d-%d", w, i)})))
			time.Sleep(5 * time.Millisecond)
		})
	}
	attack(func(int) { // no selector: every pod of the namespace
		ask(fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/*/%s", tenantNS, metricQueue))
		time.Sleep(20 * time.Millisecond)
	})
	for range 20 { // the hanging pod, by name, many at once
		attack(func(int) {
			ask(fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/hang/%s", tenantNS, metricQueue))
		})
	}

	// The same tenant on the KEDA port, with its own client certificate:
	// the victim's namespace in every call (each must be PermissionDenied),
	// a new pod selector of its own namespace on every call (past the KEDA
	// pool's 64 per namespace), its crafted pods by selector (so that this
	// adapter scrapes their pages too), and a selector of negations only
	// (InvalidArgument).
	var kedaAsked, kedaFlood atomic.Int64
	var kedaWrong sync.Map // what the tenant got wrong, by call
	attackEnd, _ := attackCtx.Deadline()
	kedaWant := func(what string, err error, want codes.Code) {
		kedaAsked.Add(1)
		// A call cut by the attack's end is not counted: its own context,
		// of the same deadline, may expire before attackCtx says so.
		if status.Code(err) != want && time.Now().Before(attackEnd) {
			kedaWrong.Store(what, fmt.Sprintf("%v, want %s", err, want))
		}
	}
	victimBySelector := &pb.ScaledObjectRef{Name: "steal", Namespace: victimNS, ScalerMetadata: map[string]string{
		"metricName": metricQueue, "targetValue": "1", "podSelector": victimSel.String(),
	}}
	attack(func(i int) {
		ref := victimRef
		if i%2 == 1 {
			ref = victimBySelector
		}
		for m, err := range kedaCalls(attackCtx, attacker, ref) {
			kedaWant("the victim's namespace: "+m, err, codes.PermissionDenied)
		}
		time.Sleep(100 * time.Millisecond)
	})
	tenantRef := func(name, selector string) *pb.ScaledObjectRef {
		return &pb.ScaledObjectRef{Name: name, Namespace: tenantNS, ScalerMetadata: map[string]string{
			"metricName": metricQueue, "targetValue": "1", "podSelector": selector,
		}}
	}
	kedaMetrics := func(ref *pb.ScaledObjectRef) error {
		rctx, rcancel := context.WithTimeout(attackCtx, 5*time.Second)
		defer rcancel()
		_, err := attacker.GetMetrics(rctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: metricQueue})
		return err
	}
	// Fewer than on the API: the calls and their TLS cost this process's
	// CPU, which the tests running beside this one time their clients with.
	attack(func(i int) {
		err := kedaMetrics(tenantRef("flood", fmt.Sprintf("app=tenant,flood=keda-%d", i)))
		kedaAsked.Add(1)
		if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unauthenticated {
			kedaWrong.Store("its own namespace", err.Error())
		}
		kedaFlood.Add(1)
		time.Sleep(10 * time.Millisecond)
	})
	for _, hp := range pages {
		attack(func(int) {
			_ = kedaMetrics(tenantRef(hp.name, "page="+hp.name))
			kedaAsked.Add(1)
			time.Sleep(time.Second)
		})
	}
	attack(func(int) {
		kedaWant("podSelector !zzz", kedaMetrics(tenantRef("all", "!zzz")), codes.InvalidArgument)
		time.Sleep(200 * time.Millisecond)
	})

	reads, failures, lastFailure, hpaInactive := 0, 0, "", 0
	kedaReads, kedaFailures, lastKEDAFailure := 0, 0, ""
	for attackCtx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		vals, err := victimReader.PodValues(rctx, victimNS, metricQueue, victimSel)
		if err == nil {
			err = checkVictimValues(rctx, e, victimNS, victimPods, vals)
		}
		h, herr := c.AutoscalingV2().HorizontalPodAutoscalers(victimNS).Get(rctx, victim.Name, metav1.GetOptions{})
		rcancel()
		reads++
		if err != nil {
			failures++
			lastFailure = err.Error()
		} else { // the KEDA port is compared only with right values
			kctx, kcancel := context.WithTimeout(ctx, 5*time.Second)
			if kerr := checkVictimKEDA(kctx, operator, victimReader, victimRef, vals); kerr != nil {
				kedaFailures++
				lastKEDAFailure = kerr.Error()
			}
			kcancel()
			kedaReads++
		}
		if herr == nil && !hpaActive(h) {
			hpaInactive++
		}
	}
	wg.Wait()
	t.Logf("during %s of attack: %d tenant questions; %d victim reads, %d failed; the victim's HPA inactive at %d of them",
		tenantAttack, asked.Load(), reads, failures, hpaInactive)
	if failures > 0 {
		t.Errorf("%d of %d reads of the victim's %s failed or were wrong; last: %s", failures, reads, metricQueue, lastFailure)
	}
	if hpaInactive > 0 {
		t.Errorf("the victim's HPA lost its metric (ScalingActive not True) at %d of %d reads", hpaInactive, reads)
	}
	t.Logf("on the KEDA port: %d calls of the tenant, %d of them new selectors of its own namespace; %d reads of the victim by KEDA's operator, %d failed",
		kedaAsked.Load(), kedaFlood.Load(), kedaReads, kedaFailures)
	if kedaFailures > 0 || kedaReads == 0 {
		t.Errorf("%d of %d reads of the victim's %s on the KEDA port failed or were wrong; last: %s", kedaFailures, kedaReads, metricQueue, lastKEDAFailure)
	}
	if n := kedaFlood.Load(); n <= 64 {
		t.Errorf("the tenant asked only %d selectors of its own namespace on the KEDA port, not past its 64 per namespace", n)
	}
	kedaWrong.Range(func(k, v any) bool {
		t.Errorf("the tenant on the KEDA port, %s: got %s", k, v)
		return true
	})
	select {
	case m := <-tooLong:
		t.Errorf("an answer quoted too much of a page: %s", m)
	default:
	}

	// Nothing forged, nothing out of range.
	for _, p := range victimPods {
		v, err := victimReader.Object(ctx, victimNS, framework.PodKind, p.Name, metricGPUUtil)
		switch {
		case err == nil:
			t.Errorf("victim pod %s has a %s the tenant's agent forged: %s", p.Name, metricGPUUtil, v.Value.String())
		case !apierrors.IsNotFound(err):
			t.Errorf("victim pod %s: %s: want 404 (no GPU value), got %v", p.Name, metricGPUUtil, err)
		}
	}
	for _, hp := range pages {
		for _, m := range hp.refused {
			path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/%s/%s", tenantNS, hp.name, m)
			code, body, err := rawGetStatus(ctx, admin, path)
			switch {
			case err != nil:
				t.Errorf("tenant pod %s: %s: %v", hp.name, m, err)
			case code != http.StatusNotFound:
				t.Errorf("tenant pod %s: %s: HTTP %d, want it refused with a 404 that says why: %.500s", hp.name, m, code, body)
			case len(body) > maxErrorMessage:
				t.Errorf("tenant pod %s: %s: the 404 is %d bytes long", hp.name, m, len(body))
			case !strings.Contains(string(body), hp.why):
				t.Errorf("tenant pod %s: %s: the 404 does not say %q: %s", hp.name, m, hp.why, body)
			default:
				t.Logf("tenant pod %s: %s refused: %s", hp.name, m, statusMessage(body))
			}
		}
	}
	// A huge but finite value is served as itself, never wrapped negative.
	code, body, err := rawGetStatus(ctx, admin, fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/%s/pods/huge-value/%s", tenantNS, metricQueue))
	if err != nil || code != http.StatusOK {
		t.Errorf("tenant pod huge-value: %s: HTTP %d, %v: %.500s", metricQueue, code, err, body)
	} else {
		var list cmv1beta2.MetricValueList
		if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 {
			t.Errorf("tenant pod huge-value: want one item: %v: %s", err, body)
		} else if v := list.Items[0].Value; v.AsApproximateFloat64() != 1e16 {
			t.Errorf("tenant pod huge-value: %s served as %s (%g), want 1e16", metricQueue, v.String(), v.AsApproximateFloat64())
		} else {
			t.Logf("tenant pod huge-value: %s served as %s", metricQueue, v.String())
		}
	}

	// The refusals are counted where operators look.
	self, err := adapterSelfMetrics(ctx, e)
	if err != nil {
		t.Fatalf("adapter self-metrics: %v", err)
	}
	for _, series := range []string{
		`inference_metrics_adapter_scrape_failures_total{reason="limit"}`,
		`inference_metrics_adapter_scrape_failures_total{reason="parse"}`,
		`inference_metrics_adapter_scrape_failures_total{reason="timeout"}`,
		`inference_metrics_adapter_rejected_samples_total{reason="negative"}`,
		`inference_metrics_adapter_rejected_samples_total{reason="above_one"}`,
	} {
		if v := self[series]; v < 1 {
			t.Errorf("adapter self-metric %s = %g, want at least 1", series, v)
		}
	}
	kself, err := selfMetricsOf(ctx, e, kp.adapter)
	if err != nil {
		t.Fatalf("the KEDA port's adapter self-metrics: %v", err)
	}
	for _, series := range []string{
		`inference_metrics_adapter_keda_scaler_requests_total{code="PermissionDenied",method="/externalscaler.ExternalScaler/GetMetrics"}`,
		`inference_metrics_adapter_keda_scaler_requests_total{code="PermissionDenied",method="/externalscaler.ExternalScaler/StreamIsActive"}`,
		`inference_metrics_adapter_keda_scaler_requests_total{code="InvalidArgument",method="/externalscaler.ExternalScaler/GetMetrics"}`,
	} {
		if v := kself[series]; v < 1 {
			t.Errorf("the KEDA port's adapter self-metric %s = %g, want at least 1", series, v)
		} else {
			t.Logf("the KEDA port's adapter: %s %g", series, v)
		}
	}

	for name, a := range map[string]*framework.Adapter{"adapter": e.Adapter, "KEDA port's adapter": kp.adapter} {
		peak, err := peakRSS(a.Process.PID())
		if err != nil {
			t.Fatalf("%s memory: %v", name, err)
		}
		t.Logf("%s peak RSS %d MiB (limit %d MiB)", name, peak>>20, adapterMemoryLimit>>20)
		if peak > adapterMemoryLimit {
			t.Errorf("%s peak RSS %d MiB exceeds the chart's memory limit of %d MiB", name, peak>>20, adapterMemoryLimit>>20)
		}
	}
}

// checkVictimKEDA reads the victim Deployment's value on the KEDA port as
// KEDA's operator (GetMetrics, then IsActive) and compares it with what the
// custom metrics API serves for the Deployment and, when vals (the pods'
// values, already checked against their pages) is given, with their sum.
// The simulators are idle, so all are steady.
func checkVictimKEDA(ctx context.Context, operator pb.ExternalScalerClient, r *framework.MetricsClient, ref *pb.ScaledObjectRef, vals map[string]float64) error {
	v, _, err := kedaRead(ctx, operator, ref)
	if err != nil {
		return fmt.Errorf("KEDA port: %w", err)
	}
	obj, err := r.Object(ctx, ref.Namespace, framework.DeploymentKind, ref.Name, metricQueue)
	if err != nil {
		return fmt.Errorf("custom metrics API, after the KEDA port's %g: %w", v, err)
	}
	if cm := obj.Value.AsApproximateFloat64(); v != cm {
		return fmt.Errorf("the KEDA port says %g, the custom metrics API %g", v, cm)
	}
	if vals != nil {
		sum := 0.0
		for _, x := range vals {
			sum += x
		}
		if v != sum {
			return fmt.Errorf("the KEDA port says %g, the victim's pods %g in all (%s)", v, sum, formatValues(vals))
		}
	}
	return nil
}

// checkVictimValues compares the adapter's values with what each victim
// pod's own page says now. The simulators are idle, so both are steady.
func checkVictimValues(ctx context.Context, e *framework.Environment, ns string, pods []corev1.Pod, vals map[string]float64) error {
	if len(vals) != len(pods) {
		return fmt.Errorf("values for %d pods (%s), want %d", len(vals), formatValues(vals), len(pods))
	}
	for _, p := range pods {
		url, ok := e.Kubelet.Endpoint(ns, p.Name)
		if !ok {
			return fmt.Errorf("no process for victim pod %s", p.Name)
		}
		own, err := simGauge(ctx, url, "vllm:num_requests_waiting")
		if err != nil {
			return err
		}
		if got := vals[p.Name]; got != own {
			return fmt.Errorf("victim pod %s: the adapter says %g, its page says %g", p.Name, got, own)
		}
	}
	return nil
}

func hpaActive(h *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive {
			return c.Status == corev1.ConditionTrue && len(h.Status.CurrentMetrics) > 0
		}
	}
	return false
}

// tenantDaemonSet is a DaemonSet the tenant owns, to make its forged agent
// look DaemonSet-controlled.
func tenantDaemonSet(ctx context.Context, t *testing.T, e *framework.Environment, ns string) *appsv1.DaemonSet {
	t.Helper()
	lbls := map[string]string{"app": "tenant-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: tenantPageImage}}},
			},
		},
	}
	ds, err := e.ControlPlane.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create tenant DaemonSet: %v", err)
	}
	return ds
}

// runTenantPod serves hp's page at ip:tenantPagePort and creates a pod
// for it, reported Running and Ready at that IP on the stand-in node, as
// the kubelet would report a real pod.
func runTenantPod(ctx context.Context, t *testing.T, e *framework.Environment, ns string, hp hostilePage, lbls map[string]string, owner *metav1.OwnerReference, ip string) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(tenantPagePort)))
	if err != nil {
		t.Fatalf("listen for tenant pod %s: %v", hp.name, err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hp.page == nil {
				<-r.Context().Done() // hang until the scraper gives up
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			hp.page(w)
		}),
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	})

	c := e.ControlPlane.Client
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hp.name, Labels: lbls},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name:  "page",
				Image: tenantPageImage,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: tenantPagePort}},
			}},
		},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
		pod.Spec.NodeName = framework.NodeName // an agent's claim: pods on the same node as the victims'
	}
	if pod, err = c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create tenant pod %s: %v", hp.name, err)
	}
	if owner != nil { // bound to a node: deleted only once its "kubelet" says so
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete tenant pod %s: %v", pod.Name, err)
			}
		})
	}
	if _, err := framework.ReportRunning(ctx, c, pod, ip); err != nil {
		t.Fatal(err)
	}
}

// forgedAgentPage is a gpu-agent page that claims the victim's pods are
// running their GPUs flat out.
func forgedAgentPage(ns string, pods []string) string {
	var b strings.Builder
	b.WriteString("gpu_agent_up{backend=\"nvml\",reason=\"ok\"} 1\n")
	for i, p := range pods {
		fmt.Fprintf(&b, "gpu_agent_pod_gpus{namespace=%q,pod=%q} 1\n", ns, p)
		fmt.Fprintf(&b, "gpu_agent_gpu_utilization_ratio{container=\"server\",gpu_model=\"NVIDIA H100 80GB HBM3\",gpu_uuid=\"GPU-forged-%d\",namespace=%q,pod=%q} 0.99\n", i, ns, p)
	}
	return b.String()
}

// hugeModelNamePage names its model with 1 MiB of fresh text on every scrape.
func hugeModelNamePage(w http.ResponseWriter) {
	name := make([]byte, 512<<10)
	_, _ = rand.Read(name)
	fmt.Fprintf(w, "vllm:num_requests_waiting{engine=\"0\",model_name=\"%s\"} 1\n", hex.EncodeToString(name))
}

// longModelNamesPage names 64 models (the parser's most per page) with
// names of 1 KiB (its most per label value), fresh on every scrape: 64 KiB
// of names, past the 8 KiB of model names the store keeps per pod.
func longModelNamesPage(w http.ResponseWriter) {
	var b bytes.Buffer
	name := make([]byte, 512)
	for range 64 {
		_, _ = rand.Read(name)
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"0\",model_name=\"%s\"} 1\n", hex.EncodeToString(name))
	}
	_, _ = w.Write(b.Bytes())
}

// manyModelsPage reports 40,000 models.
func manyModelsPage(w http.ResponseWriter) {
	var b bytes.Buffer
	for i := range 40000 {
		fmt.Fprintf(&b, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m%d\"} 1\n", i)
	}
	_, _ = w.Write(b.Bytes())
}

// badValuesPage carries values the HPA must never see: a negative batch and
// a KV-cache fraction of 7.5.
func badValuesPage(w http.ResponseWriter) {
	fmt.Fprint(w, `vllm:num_requests_running{engine="0",model_name="m"} -3
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 7.5
`)
}

// hugeValuePage has a queue past int64 milli-units, which once wrapped negative.
func hugeValuePage(w http.ResponseWriter) {
	fmt.Fprint(w, `vllm:num_requests_waiting{engine="0",model_name="m"} 1e16
`)
}

// duplicatesPage repeats one series exactly: Prometheus rejects such a page.
func duplicatesPage(w http.ResponseWriter) {
	fmt.Fprint(w, `vllm:num_requests_waiting{engine="0",model_name="m"} 3
vllm:num_requests_waiting{engine="0",model_name="m"} 3
`)
}

// malformedPage has a 1 MiB value of control bytes.
func malformedPage(w http.ResponseWriter) {
	fmt.Fprintf(w, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %s\n", bytes.Repeat([]byte{1}, 1<<20))
}

// adapterSelfMetrics reads the adapter's own /metrics, as the admin, into
// a map from each sample's name and labels to its value.
func adapterSelfMetrics(ctx context.Context, e *framework.Environment) (map[string]float64, error) {
	return selfMetricsOf(ctx, e, e.Adapter)
}

// selfMetricsOf is adapterSelfMetrics of another adapter a.
func selfMetricsOf(ctx context.Context, e *framework.Environment, a *framework.Adapter) (map[string]float64, error) {
	c, err := a.HTTPClient(e.ControlPlane.Admin)
	if err != nil {
		return nil, err
	}
	page, err := framework.GetPage(ctx, c, a.URL()+"/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "inference_metrics_adapter_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// statusMessage is the message of a Status body, or the body.
func statusMessage(body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return string(body)
}

// peakRSS reads a process's peak resident set size (VmHWM) from /proc.
func peakRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}
