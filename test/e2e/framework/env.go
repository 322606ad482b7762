// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package framework owns the end-to-end harness: a real control plane
// (etcd, kube-apiserver, kube-controller-manager) on 127.0.0.1 with
// certificates made per run, a kubelet stand-in that runs inference-sim (and
// gpu-agent) processes for pods on loopback addresses, with fake GPUs published
// on a real pod-resources gRPC server, a Service stand-in for load,
// and the inference-metrics-adapter registered as custom.metrics.k8s.io.
// Every process it starts is recorded by PID, logs to a file, and is
// stopped in teardown.
//
// It also holds the helpers the test programs share (test/e2e, test/helm,
// the demo, the soak, the fleet benchmark): MetricsClient reads the
// metrics APIs with the HPA's typed clients, GetPage and MetricFamilies
// read /metrics pages, HPA, PodsMetric and QuickBehavior build HPAs, and
// helm.go finds and runs the chart and helm. See docs/e2e.md.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Components the environment may lack; Require names them.
const (
	ComponentSim      = "inference-sim"
	ComponentAdapter  = "inference-metrics-adapter"
	ComponentGPUAgent = "gpu-agent"
)

// AdapterNamespace and AdapterService name where the adapter is registered.
const (
	AdapterNamespace = "custom-metrics"
	AdapterService   = "inference-metrics-adapter"
)

// AdapterArgs returns the adapter flags the suite runs with: a fast scrape
// and a short max age so that tests see changes within seconds, and the
// gpu-agent namespace (the adapter's own, as the chart sets it).
func AdapterArgs() []string {
	return []string{"--scrape-interval=1s", "--scrape-timeout=800ms", "--max-age=5s", "--v=2",
		// The forecast's method choices (auto) and fallbacks, logged at
		// -v=4 in forecast.go only: tests read them from the log.
		"--vmodule=forecast=4",
		// The forecast's windows shortened as the suite shortens time (the
		// HPA syncs every 1 s, not 15 s): a history keeps 64 samples over
		// the longer window, about one a second over 1m where 15m keeps one
		// every 14 s, coarser than TestForecastAheadOfBursts' 12 s bursts.
		"--forecast-window=1m", "--forecast-floor-window=1m",
		// The gpu-agent DaemonSet's namespace: the only one whose agents are believed.
		"--gpu-agent-namespace=" + AdapterNamespace,
		// Nothing is behind a load balancer here: stop at once.
		"--shutdown-delay=0s"}
}

// Environment is everything the suite runs against.
type Environment struct {
	// Dir holds certificates, kubeconfigs, binaries and logs (Dir/logs).
	Dir          string
	ControlPlane *ControlPlane
	Kubelet      *Kubelet
	Adapter      *Adapter
	// SimBinary is the inference-sim executable, when built.
	SimBinary string
	// unavailable says, per component, why it is not running.
	unavailable map[string]error
}

// Setup builds the project's binaries from root, starts the control plane
// from binDir, then the kubelet stand-in and the adapter where their
// commands exist. A command not written yet is recorded, not an error, so
// tests that need it skip; one that fails to build is recorded too, and
// tests that need it fail with the build output.
func Setup(ctx context.Context, root, binDir string) (e *Environment, err error) {
	dir, err := os.MkdirTemp("", "ima-e2e-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	e = &Environment{Dir: dir, unavailable: map[string]error{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Teardown(context.Background()))
		}
	}()
	bins := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bins, 0o755); err != nil {
		return e, err
	}
	adapterBin, adapterErr := BuildCommand(ctx, root, bins, ComponentAdapter)
	e.SimBinary, err = BuildCommand(ctx, root, bins, ComponentSim)
	if err != nil {
		e.unavailable[ComponentSim] = err
	}
	agentBin, agentErr := BuildCommand(ctx, root, bins, ComponentGPUAgent)
	if agentErr != nil {
		e.unavailable[ComponentGPUAgent] = agentErr
	}
	if adapterErr != nil {
		e.unavailable[ComponentAdapter] = adapterErr
	}

	if e.ControlPlane, err = StartControlPlane(ctx, binDir, dir); err != nil {
		return e, fmt.Errorf("start control plane: %w", err)
	}
	if e.SimBinary != "" {
		if e.Kubelet, err = StartKubelet(ctx, e.ControlPlane.Client, e.SimBinary, e.ControlPlane.LogDir); err != nil {
			return e, err
		}
		if agentErr == nil {
			if err := e.Kubelet.EnableGPUs(agentBin, dir); err != nil {
				return e, err
			}
		}
	}
	if adapterErr == nil {
		e.Adapter, err = StartAdapter(ctx, e.ControlPlane, AdapterConfig{
			Binary:    adapterBin,
			Namespace: AdapterNamespace,
			Service:   AdapterService,
			Args:      AdapterArgs(),
		})
		if err != nil {
			return e, fmt.Errorf("start adapter: %w", err)
		}
	}
	return e, nil
}

// Require skips t when a component is not written yet and fails it when
// the component did not build.
func (e *Environment) Require(t testing.TB, components ...string) {
	t.Helper()
	for _, c := range components {
		err, ok := e.unavailable[c]
		switch {
		case !ok:
		case errors.Is(err, ErrNotWritten):
			t.Skipf("needs %s: %v", c, err)
		default:
			t.Fatalf("needs %s, which did not build: %v", c, err)
		}
	}
}

// Unavailable describes the components that are not running, for the log.
func (e *Environment) Unavailable() string {
	var parts []string
	for c, err := range e.unavailable {
		parts = append(parts, c+": "+firstLine(err.Error()))
	}
	return strings.Join(parts, "; ")
}

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + rand.String(5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.ControlPlane.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.ControlPlane.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// Teardown stops everything in order: the adapter's APIServices, the
// adapter, the simulators, kube-controller-manager, kube-apiserver, etcd.
func (e *Environment) Teardown(ctx context.Context) error {
	var errs []error
	if e.Adapter != nil {
		errs = append(errs, e.Adapter.Stop(ctx))
	}
	if e.Kubelet != nil {
		errs = append(errs, e.Kubelet.Stop())
	}
	if e.ControlPlane != nil {
		errs = append(errs, e.ControlPlane.Stop())
	}
	return errors.Join(errs...)
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
