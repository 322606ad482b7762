// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

const (
	metricLoRAWaiting = "inference_lora_adapter_waiting"
	metricLoRARunning = "inference_lora_adapter_running"
)

// TestLoRAAdapters: one simulator pod serves LoRA adapters a and b with
// --max-loras 1 (vLLM's: one adapter in the running batch). Streams of a
// run (slow decoding keeps them running), requests of b wait behind them,
// and the pod's page says so in vLLM's vllm:lora_requests_info. Through
// the aggregated API, with the typed client: per pod, waiting is 1 for
// lora_name=b and 0 for a, running is 1 for a and 0 for b; the
// Deployment's object value of waiting for b is 1 (its one Ready pod).
func TestLoRAAdapters(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	// 2,000 tokens at 50 ms a step: a stream runs for 100 s, longer than
	// the test, which ends it.
	d := simDeployment("lora", 1, "--lora-adapters=a,b", "--max-loras=1", "--decode-time-base=50ms")
	pods := createSimDeployment(t, e, ns, d, 1)
	pod := pods[0].Name
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	u, _ := e.Kubelet.Endpoint(ns, pod)

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	streams, stopStreams := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after stopStreams, deferred below
	defer stopStreams()
	// Three streams of a, each running once its first token arrives.
	for range 3 {
		if err := openLoRAStream(streams, &wg, u, "a", true); err != nil {
			t.Fatalf("stream of a: %v", err)
		}
	}
	// Two requests of b: they wait while a holds the only adapter slot.
	for range 2 {
		if err := openLoRAStream(streams, &wg, u, "b", false); err != nil {
			t.Fatalf("request of b: %v", err)
		}
	}

	want := []struct {
		metric, lora string
		value        float64
	}{
		{metricLoRAWaiting, "b", 1},
		{metricLoRAWaiting, "a", 0},
		{metricLoRARunning, "a", 1},
		{metricLoRARunning, "b", 0},
	}
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var got []string
		ok := true
		for _, w := range want {
			v, err := loraPodValue(ctx, e, ns, w.metric, selector, w.lora, pod)
			if err != nil {
				noteErr(ctx, &last, err)
				return false, nil
			}
			got = append(got, fmt.Sprintf("%s{lora_name=%s}=%g", w.metric, w.lora, v))
			ok = ok && v == w.value
		}
		last = strings.Join(got, " ")
		return ok, nil
	})
	if err != nil {
		pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
		page, _ := framework.GetPage(pctx, nil, u+"/metrics")
		pcancel()
		t.Fatalf("per-pod adapter values never matched (last: %s): %v\nthe pod's lora lines:\n%s", last, err, loraLines(page))
	}
	t.Logf("per pod: %s", last)

	// The Deployment: the number of its Ready pods where b waits.
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		v, err := e.ControlPlane.Metrics.Custom.NamespacedMetrics(ns).GetForObject(framework.DeploymentKind, d.Name, metricLoRAWaiting,
			labels.SelectorFromSet(labels.Set{"lora_name": "b"}))
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = fmt.Sprintf("deployment %s %s{lora_name=b}=%s", d.Name, metricLoRAWaiting, v.Value.String())
		return v.Value.AsApproximateFloat64() == 1, nil
	})
	if err != nil {
		t.Fatalf("the Deployment's waiting value for b never read 1 (last: %s): %v", last, err)
	}
	t.Logf("%s", last)
}

// openLoRAStream starts a streaming completion of 2,000 tokens of model
// at base on its own goroutine (counted in wg), which holds it open until
// ctx ends. With waitFirst it returns once the first token arrived (the
// request is running); otherwise at once, the request may still wait.
func openLoRAStream(ctx context.Context, wg *sync.WaitGroup, base, model string, waitFirst bool) error {
	body := `{"model":"` + model + `","prompt":"abc abc abc abc","max_tokens":2000,"stream":true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	first := make(chan error, 1)
	wg.Go(func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			first <- fmt.Errorf("status %d", resp.StatusCode)
			return
		}
		r := bufio.NewReader(resp.Body)
		line, err := r.ReadString('\n')
		if err == nil && !strings.Contains(line, `"model":"`+model+`"`) {
			err = fmt.Errorf("first event %q does not name model %s", line, model)
		}
		first <- err
		for err == nil { // hold the stream open until ctx ends
			_, err = r.ReadString('\n')
		}
	})
	if !waitFirst {
		return nil
	}
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loraPodValue is the adapter's value of metric for pod with the metric
// selector lora_name=lora.
func loraPodValue(ctx context.Context, e *framework.Environment, ns, metric string, selector labels.Selector, lora, pod string) (float64, error) {
	list, err := e.ControlPlane.Metrics.Pods(ctx, ns, metric, selector, labels.SelectorFromSet(labels.Set{"lora_name": lora}))
	if err != nil {
		return 0, err
	}
	for _, it := range list.Items {
		if it.DescribedObject.Name == pod {
			return it.Value.AsApproximateFloat64(), nil
		}
	}
	return 0, fmt.Errorf("%s lora_name=%s: pod %s not in the answer (%d items)", metric, lora, pod, len(list.Items))
}

// loraLines returns the vllm:lora_requests_info lines of a page, for a
// failure message.
func loraLines(page []byte) string {
	var out []string
	for _, l := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(l, "vllm:lora_requests_info") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
