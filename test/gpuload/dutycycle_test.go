// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package gpuload

import (
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/nvml"
)

// cycle runs the kernel on blocks blocks for on of every period until d has
// passed, the way a model server's engine steps alternate with host work.
func cycle(g *GPU, blocks int, on, period, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if err := g.Spin(blocks, on); err != nil {
			return err
		}
		time.Sleep(period - time.Since(start))
	}
	return nil
}

// NVML's utilization is the share of time in which any kernel ran, whatever
// it occupied; GPM SM activity also weighs how much of the GPU it occupied.
// The simulator's fake NVML backend (the `sim` profile) models exactly that:
// utilization = busy share, SM activity = busy share × step fullness. This
// checks the model against the real driver at several duty cycles.
func TestRealDutyCycle(t *testing.T) {
	g := needGPU(t)
	r := nvml.NewReader(os.Getenv("IMA_NVML_LIBRARY"))
	defer r.Close()
	gpus, err := r.Read(nil)
	if err != nil {
		t.Fatal(err)
	}
	record(t, "duty-cycle.md", "| busy share | blocks | utilization | SM activity | model: utilization, SM activity |\n|---|---|---|---|---|\n")
	const period = 20 * time.Millisecond
	for _, duty := range []float64{0.1, 0.25, 0.5, 0.75} {
		for _, blocks := range []int{1, 4 * g.SMs()} {
			t.Run(fmt.Sprintf("busy %.2f blocks %d", duty, blocks), func(t *testing.T) {
				on := time.Duration(duty * float64(period))
				done := make(chan error, 1)
				go func() { done <- cycle(g, blocks, on, period, 4*time.Second) }()
				time.Sleep(1500 * time.Millisecond)
				if _, err := r.Read(gpus); err != nil {
					t.Fatal(err)
				}
				time.Sleep(1500 * time.Millisecond)
				got, err := r.Read(gpus)
				if err != nil {
					t.Fatal(err)
				}
				gpus = got
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				d := got[0]
				fullness := float64(min(blocks, g.SMs())) / float64(g.SMs())
				wantSM := duty * fullness
				t.Logf("busy %.2f, %d blocks: utilization %.2f, SM activity %.4f (model %.2f, %.4f)", duty, blocks, d.Utilization, d.SMActive, duty, wantSM)
				record(t, "duty-cycle.md", fmt.Sprintf("| %.2f | %d | %.2f | %.4f | %.2f, %.4f |\n", duty, blocks, d.Utilization, d.SMActive, duty, wantSM))
				if !d.HasUtilization || !d.HasSMActive {
					t.Fatalf("utilization present %v, SM activity present %v", d.HasUtilization, d.HasSMActive)
				}
				// Launch and synchronization add a little busy time per
				// cycle, and NVML samples its window coarsely.
				if math.Abs(d.Utilization-duty) > 0.2 {
					t.Errorf("utilization %.2f at a busy share of %.2f, want within 0.2", d.Utilization, duty)
				}
				if math.Abs(d.SMActive-wantSM) > 0.2 {
					t.Errorf("SM activity %.4f, the model says %.4f, want within 0.2", d.SMActive, wantSM)
				}
			})
		}
	}
}
