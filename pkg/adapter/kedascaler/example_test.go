// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestExampleScaledObjects: every external trigger of the ScaledObjects in
// manifests/examples/keda has metadata the scaler accepts.
func TestExampleScaledObjects(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "manifests", "examples", "keda", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests/examples/keda/*.yaml (err %v)", err)
	}
	triggers := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var obj struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
				Spec     struct {
					Triggers []struct {
						Type     string
						Metadata map[string]string
					}
				}
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Kind != "ScaledObject" {
				continue
			}
			for _, tr := range obj.Spec.Triggers {
				if !strings.HasPrefix(tr.Type, "external") {
					continue
				}
				triggers++
				if _, err := parseQuery(obj.Metadata.Namespace, tr.Metadata); err != nil {
					t.Errorf("%s: ScaledObject %s: %v", filepath.Base(f), obj.Metadata.Name, err)
				}
			}
		}
	}
	if triggers == 0 {
		t.Error("no external trigger in the examples")
	}
}
