// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/catalog"
)

// TestExamplesNameServedMetrics: every HPA in manifests/examples decodes
// strictly (no unknown field) and scales on metrics the adapter serves. The
// e2e suite (TestHelmInstall) also has the API server accept each one.
func TestExamplesNameServedMetrics(t *testing.T) {
	files, err := filepath.Glob("../../../manifests/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests/examples/*.yaml: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := sigsyaml.UnmarshalStrict(b, &h); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if len(h.Spec.Metrics) == 0 {
			t.Errorf("%s: no metrics", filepath.Base(f))
		}
		for _, m := range h.Spec.Metrics {
			var name string
			switch {
			case m.Pods != nil:
				name = m.Pods.Metric.Name
			case m.Object != nil:
				name = m.Object.Metric.Name
			case m.External != nil:
				name = m.External.Metric.Name
			}
			if _, ok := catalog.ByName(name); !ok && name != catalog.DemandPerReplica && !slices.Contains(catalog.LoRAAdapterMetrics(), name) {
				t.Errorf("%s: metric %q is not served", filepath.Base(f), name)
			}
		}
	}
}
