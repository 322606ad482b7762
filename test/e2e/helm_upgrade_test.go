// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// previousChart is the chart's previous version, packaged by helm; see
// testdata/README.md for the commit it was packaged from.
const previousChart = "testdata/inference-metrics-adapter-0.1.0.tgz"

// postRenderArg makes the test binary a helm post-renderer (see TestMain):
// helm runs it with this one argument, the rendered manifests on stdin.
const postRenderArg = "ima-e2e-post-render-service-to-loopback"

// postRenderServiceToLoopback copies the manifests from r to w, with the
// release's Service made an ExternalName of 127.0.0.1: what
// serviceToLoopback patches after an install, but inside the release, so
// that helm upgrade keeps it instead of restoring the ClusterIP Service
// that nothing on this machine answers.
func postRenderServiceToLoopback(r io.Reader, w io.Writer) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("post-render: decode: %w", err)
		}
		if obj == nil {
			continue
		}
		u := unstructured.Unstructured{Object: obj}
		if u.GetKind() == "Service" && u.GetName() == framework.HelmRelease {
			ports, _, _ := unstructured.NestedSlice(obj, "spec", "ports")
			spec := map[string]any{"type": "ExternalName", "externalName": "127.0.0.1"}
			if ports != nil {
				spec["ports"] = ports
			}
			obj["spec"] = spec
		}
		out, err := sigsyaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("post-render: encode: %w", err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
	}
}

// upgradeProbe asks, every interval until stopped, whether each APIService
// of the release is Available and whether the HPA controller's identity
// gets the pod's queue size through the aggregator, as the HPA would on
// every sync: the availability the upgrade must keep.
type upgradeProbe struct {
	samples, unavailable, failed int
	firstProblems                []string

	stop chan struct{}
	done sync.WaitGroup
}

func (in *install) startUpgradeProbe(t *testing.T, interval time.Duration) *upgradeProbe {
	t.Helper()
	p := &upgradeProbe{stop: make(chan struct{})}
	// The HPA's question, as the HPA controller asks it: its identity, its
	// typed client, each answer bounded by five intervals.
	hpaConfig := in.h.cp.Impersonate(hpaControllerUser, hpaControllerGroups...)
	hpaConfig.Timeout = interval * 5
	hpa, err := framework.NewMetricsClient(hpaConfig)
	if err != nil {
		t.Fatal(err)
	}
	selector := labels.SelectorFromSet(labels.Set{"app": "chart-scenario"})
	problem := func(format string, args ...any) {
		if len(p.firstProblems) < 10 {
			p.firstProblems = append(p.firstProblems, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
		}
	}
	p.done.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), interval*5)
			p.samples++
			if notYet := in.notAvailable(ctx); len(notYet) > 0 {
				p.unavailable++
				problem("APIServices not Available: %v", notYet)
			}
			vals, err := hpa.PodValues(ctx, in.ns, metricQueue, selector)
			cancel()
			switch {
			case err != nil:
				p.failed++
				problem("answer: %v", err)
			case !onlyValue(vals, 7):
				p.failed++
				problem("answer: %v, want one pod at 7", vals)
			}
		}
	})
	return p
}

// onlyValue reports whether vals holds one pod, at want.
func onlyValue(vals map[string]float64, want float64) bool {
	for _, v := range vals {
		return len(vals) == 1 && v == want
	}
	return false
}

func (p *upgradeProbe) finish() {
	close(p.stop)
	p.done.Wait()
}

// notAvailable is the release's APIServices that are not Available now,
// with their condition; an error listing them counts as all unavailable.
func (in *install) notAvailable(ctx context.Context) map[string]string {
	list, err := in.h.cp.Dynamic.Resource(apiServicesGVR).List(ctx, metav1.ListOptions{LabelSelector: instanceKey + "=" + framework.HelmRelease})
	if err != nil {
		return map[string]string{"(list)": err.Error()}
	}
	out := map[string]string{}
	for _, a := range list.Items {
		if a.GetNamespace() != "" || !strings.Contains(a.GetName(), "metrics.k8s.io") {
			continue
		}
		svcNS, _, _ := unstructured.NestedString(a.Object, "spec", "service", "namespace")
		if svcNS != in.ns {
			continue
		}
		out[a.GetName()] = "no Available condition"
		conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" {
				if m["status"] == "True" {
					delete(out, a.GetName())
				} else {
					out[a.GetName()] = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				}
			}
		}
	}
	return out
}

// checkUpgrade installs the previous chart version with two adapter
// replicas behind a stand-in of its Service, upgrades the release to this
// chart, and replaces the replicas one at a time with this chart's
// arguments, surge first, as the Deployment's rolling update (maxSurge 1,
// maxUnavailable 0) does under the chart's PodDisruptionBudget. A probe asks
// the APIServices' availability and the HPA's question every 200 ms
// throughout: the upgrade must cost no unavailable second and no failed
// answer.
func (h *helmEnv) checkUpgrade(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Abs(previousChart)
	if err != nil {
		t.Fatal(err)
	}
	// Three replica slots: two old replicas, and room for the surge.
	var ports []int
	var backends []string
	for range 3 {
		p, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
		backends = append(backends, "127.0.0.1:"+strconv.Itoa(p))
	}
	proxy, err := framework.StartLoopbackProxy(backends)
	if err != nil {
		t.Fatal(err)
	}
	// A slot's endpoint is ready once its replica's /readyz passes, and
	// stops being ready when the replica is told to stop, as the kubelet
	// and the endpoints controller treat a pod.
	for slot := range backends {
		proxy.SetReady(slot, false)
	}
	in := &install{h: h, ci: "upgrade", ns: "ima-upgrade", port: proxy.Port()}
	replicas := map[int]*framework.Process{} // by slot
	// Cleanups run last first: the release is uninstalled while the replicas
	// still serve, then they and the proxy stop.
	t.Cleanup(func() {
		for slot, p := range replicas {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Errorf("stop replica in slot %d: %v", slot, err)
			}
			if t.Failed() {
				t.Logf("replica in slot %d log:\n%s", slot, p.Tail(30))
			}
		}
		if err := proxy.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	release := func(verb, chart string) string {
		args := []string{verb, framework.HelmRelease, chart, "--namespace", in.ns, "--create-namespace",
			"--set", "service.port=" + strconv.Itoa(in.port),
			"--post-renderer", self, "--post-renderer-args", postRenderArg, "--wait=false"}
		if chart == h.chart {
			// The current chart requires the API NetworkPolicy's addresses.
			args = append(args, "--set", "apiNetworkPolicy.controlPlaneCIDRs={192.0.2.10/32}")
		}
		return h.runHelm(t, args...)
	}
	start := func(slot int, name string) {
		t.Helper()
		p, err := framework.StartProcess(name, h.cp.LogDir, h.adapterBin, in.adapterArgs(t, name, ports[slot]), nil)
		if err != nil {
			t.Fatal(err)
		}
		replicas[slot] = p
		c, err := framework.TLSClient(in.caPEM, nil, framework.HelmRelease+"."+in.ns+".svc")
		if err != nil {
			t.Fatal(err)
		}
		var last string
		if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(ports[slot]) + "/readyz")
			if err != nil {
				last = err.Error()
				return false, nil
			}
			resp.Body.Close()
			last = resp.Status
			return resp.StatusCode == 200, nil
		}); err != nil {
			t.Fatalf("replica %s never ready in 60s; last /readyz: %s\n%s", name, last, p.Tail(30))
		}
		proxy.SetReady(slot, true)
	}
	stop := func(slot int) {
		t.Helper()
		proxy.SetReady(slot, false)
		if err := replicas[slot].Stop(10 * time.Second); err != nil {
			t.Errorf("stop replica in slot %d: %v", slot, err)
		}
		delete(replicas, slot)
	}

	out := release("install", old)
	in.uninstall = true
	t.Cleanup(func() { in.cleanup(t) })
	if !strings.Contains(out, "VERSION: 1") && !strings.Contains(out, "REVISION: 1") {
		t.Logf("helm install output:\n%s", out)
	}
	in.loadServingCert(t)
	oldCA := bytes.Clone(in.caPEM)
	start(0, "adapter-old-0")
	start(1, "adapter-old-1")
	if notYet := in.waitAvailable(t, 60*time.Second); len(notYet) > 0 {
		t.Fatalf("previous chart: APIServices not Available: %v", notYet)
	}
	in.adapter = replicas[0] // for checkScenario's failure message
	in.checkScenario(t)

	probe := in.startUpgradeProbe(t, 200*time.Millisecond)
	began := time.Now()
	release("upgrade", h.chart)
	in.loadServingCert(t)
	// The previous chart's certificate has no expiry annotation, so the
	// upgrade issues a 365-day one; the CA bundle must still hold the old CA,
	// or every replica of the old version fails TLS until it is replaced.
	if !bytes.Contains(in.caPEM, bytes.TrimSpace(oldCA)) {
		t.Errorf("helm upgrade dropped the serving CA of the old replicas from ca.crt: every replica of the old version now fails TLS")
	}
	// The rolling update: a new replica, then an old one goes; twice.
	start(2, "adapter-new-0")
	stop(0)
	start(0, "adapter-new-1")
	stop(1)
	in.adapter = replicas[0]
	time.Sleep(2 * time.Second) // the probe sees the end state too
	probe.finish()
	took := time.Since(began)

	t.Logf("helm upgrade %s -> current chart with 2 replicas rolled one at a time: %d probes over %s, APIServices unavailable in %d (%.1f s), failed answers %d",
		filepath.Base(old), probe.samples, took.Round(100*time.Millisecond), probe.unavailable, float64(probe.unavailable)*0.2, probe.failed)
	if probe.samples < 10 {
		t.Fatalf("only %d probes during the upgrade: it proves nothing", probe.samples)
	}
	if probe.unavailable > 0 || probe.failed > 0 {
		t.Errorf("the upgrade was not seamless; first problems:\n%s", strings.Join(probe.firstProblems, "\n"))
	}
	in.checkRollingUpdateGuards(t)
}

// checkRollingUpdateGuards: the upgraded release keeps what made the roll
// above the real one: two replicas, maxUnavailable 0, and a
// PodDisruptionBudget that keeps one of them through a node drain.
func (in *install) checkRollingUpdateGuards(t *testing.T) {
	t.Helper()
	d := in.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("the chart's Deployment has replicas %v, want at least 2", d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil || intstr.ValueOrDefault(ru.MaxUnavailable, intstr.FromInt32(1)).IntValue() != 0 {
		t.Errorf("the chart's Deployment strategy %+v: want maxUnavailable 0", d.Spec.Strategy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pdb, err := in.h.cp.Client.PolicyV1().PodDisruptionBudgets(in.ns).Get(ctx, framework.HelmRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's PodDisruptionBudget: %v", err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
		t.Errorf("the chart's PodDisruptionBudget minAvailable %v, want at least 1", pdb.Spec.MinAvailable)
	}
}

func TestPostRenderServiceToLoopback(t *testing.T) {
	in := `apiVersion: v1
kind: Service
metadata:
  name: ` + framework.HelmRelease + `
spec:
  type: ClusterIP
  selector: {app: x}
  ports:
  - port: 443
    targetPort: https
---
apiVersion: v1
kind: Service
metadata:
  name: other
spec:
  type: ClusterIP
---
# an empty document
`
	var out bytes.Buffer
	if err := postRenderServiceToLoopback(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
	var got []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			got = append(got, obj)
		}
	}
	if len(got) != 2 {
		t.Fatalf("got %d objects, want 2:\n%s", len(got), out.String())
	}
	spec := got[0]["spec"].(map[string]any)
	if spec["type"] != "ExternalName" || spec["externalName"] != "127.0.0.1" || spec["selector"] != nil || spec["ports"] == nil {
		t.Errorf("release Service spec = %v, want an ExternalName of 127.0.0.1 keeping its ports", spec)
	}
	if other := got[1]["spec"].(map[string]any); other["type"] != "ClusterIP" {
		t.Errorf("another Service was changed: %v", other)
	}
}
