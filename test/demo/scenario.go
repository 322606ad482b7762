// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/loadgen"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/tools/sim"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// The embedded scenario. One simulated server runs at most 4 requests at a
// time with 20 ms steps, so it serves about 6 requests/s of 64 prompt and
// 32 output tokens; the load peaks at 18/s, three times that, which 4 or 5
// pods serve with a short queue and 6 serve easily.
const (
	namespace    = "demo"
	name         = "model"
	model        = "demo-model"
	promptTokens = 64
	outputTokens = 32

	baseRate = 3.0  // requests/s at the start and the end
	peakRate = 18.0 // requests/s at the top of the ramp

	queueMetric = "inference_queue_size"
	batchMetric = "inference_batch_size"
	kvMetric    = "inference_kv_cache_usage"
	queueTarget = 3 // waiting requests per pod the HPA aims for

	minReplicas       = 1
	maxReplicas       = 6
	sampleEvery       = 2 * time.Second
	ttftWindow        = 6 * time.Second
	maxInFlight       = 2000
	requestTimeout    = 2 * time.Minute
	simShutdownPeriod = "1s"
)

// simConfig is the simulated server every pod runs.
func simConfig() sim.Config {
	c := sim.DefaultConfig()
	c.Model = model
	c.MaxNumSeqs = 4
	c.NumGPUBlocks = 32 // 4 requests of 96 tokens use 24 blocks: KV usage up to 75%
	c.MaxModelLen = c.NumGPUBlocks * c.BlockSize
	c.StepBase = 20 * time.Millisecond
	return c
}

// simArgs are the flags that make inference-sim run c.
func simArgs(c sim.Config) []string {
	return []string{
		"--model=" + c.Model,
		"--max-num-seqs=" + strconv.Itoa(c.MaxNumSeqs),
		"--num-gpu-blocks=" + strconv.Itoa(c.NumGPUBlocks),
		"--block-size=" + strconv.Itoa(c.BlockSize),
		"--max-model-len=" + strconv.Itoa(c.MaxModelLen),
		"--decode-time-base=" + c.StepBase.String(),
		"--decode-time-per-seq=" + c.StepPerSeq.String(),
		"--prefill-time-per-token=" + c.PrefillPerToken.String(),
		"--shutdown-timeout=" + simShutdownPeriod,
	}
}

// schedule is the load over d: the base rate for the first 10%, a ramp in
// 6 steps to the peak until 25%, the peak until 50%, a ramp down until 60%,
// and the base rate for the last 40%, when the HPA scales back down.
func schedule(d time.Duration) []loadgen.Phase {
	const steps = 6
	type point struct {
		at   float64 // fraction of d where the phase ends
		rate float64
	}
	points := []point{{0.10, baseRate}}
	for i := 1; i <= steps; i++ {
		points = append(points, point{0.10 + 0.15*float64(i)/steps, baseRate + (peakRate-baseRate)*float64(i)/steps})
	}
	points = append(points, point{0.50, peakRate})
	for i := 1; i <= steps; i++ {
		points = append(points, point{0.50 + 0.10*float64(i)/steps, peakRate - (peakRate-baseRate)*float64(i)/steps})
	}
	points = append(points, point{1, baseRate})

	var out []loadgen.Phase
	var prev time.Duration
	for _, p := range points {
		end := (time.Duration(p.at*float64(d)) + 50*time.Millisecond).Truncate(100 * time.Millisecond)
		if p.at == 1 {
			end = d
		}
		if end > prev {
			out = append(out, loadgen.Phase{Rate: math.Round(p.rate*10) / 10, Duration: end - prev})
			prev = end
		}
	}
	return out
}

// rateAt is the scheduled arrival rate at offset t; the last phase's
// after the schedule.
func rateAt(phases []loadgen.Phase, t time.Duration) float64 {
	var end time.Duration
	for _, p := range phases {
		end += p.Duration
		if t < end {
			return p.Rate
		}
	}
	if len(phases) == 0 {
		return 0
	}
	return phases[len(phases)-1].Rate
}

// scaleDownWindow is the HPA's scale-down stabilization for a run of d: a
// third of it (from the end of the ramp up past the end of the peak),
// between 15 s and 5 min. With an
// open-loop load the queue is near 0 once there are enough pods, so the
// HPA recommends fewer; the window holds the fleet through the peak and
// lets it scale down in the last part of the run.
func scaleDownWindow(d time.Duration) int32 {
	w := min(max(d/3, 15*time.Second), 5*time.Minute)
	return int32(w / time.Second)
}

// deployment runs inference-sim pods (the kubelet stand-in starts them).
func deployment(args []string) *appsv1.Deployment {
	d := framework.SimDeployment(name, minReplicas, args)
	d.Namespace = namespace
	return d
}

// hpa scales the Deployment on its pods' average queue with the quick
// behavior of the e2e tests (up at once, at most 4 pods per 5 s), down
// after downWindow seconds of lower recommendations, at most 2 pods per
// 10 s.
func hpa(downWindow int32) *autoscalingv2.HorizontalPodAutoscaler {
	h := framework.HPA(name, minReplicas, maxReplicas, framework.PodsMetric(queueMetric, strconv.Itoa(queueTarget)),
		framework.QuickBehavior(downWindow, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 10}))
	h.Namespace = namespace
	return h
}

// describe is the scenario in a few lines, printed before the table.
func describe(c sim.Config, phases []loadgen.Phase, d time.Duration) []string {
	return []string{
		fmt.Sprintf("Deployment %s/%s: inference-sim pods (max %d running requests, %s steps); one pod serves about %.1f req/s of %d+%d tokens",
			namespace, name, c.MaxNumSeqs, c.StepBase, c.Capacity(promptTokens, outputTokens), promptTokens, outputTokens),
		fmt.Sprintf("HPA %s/%s: %s target %d per pod, %d..%d replicas, scale down after %ds",
			namespace, name, queueMetric, queueTarget, minReplicas, maxReplicas, scaleDownWindow(d)),
		fmt.Sprintf("load: Poisson, streaming completions, %.0f -> %.0f -> %.0f req/s over %s (%d phases); Ctrl-C ends it early",
			baseRate, peakRate, baseRate, d, len(phases)),
	}
}
