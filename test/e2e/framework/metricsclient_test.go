// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// fakeMetricsAPI serves discovery with custom.metrics.k8s.io preferring
// version, one pod value and one Deployment value in that version's
// shape, an external value, and 404 Status for everything else. It records
// the paths asked with their label selectors.
type fakeMetricsAPI struct {
	version string
	mu      sync.Mutex
	asked   []string
}

func (f *fakeMetricsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.asked = append(f.asked, r.URL.Path+"?labelSelector="+r.URL.Query().Get("labelSelector"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	item := func(kind, name string) string {
		described := fmt.Sprintf(`"describedObject":{"kind":%q,"namespace":"ns","name":%q}`, kind, name)
		if f.version == "v1beta1" {
			return fmt.Sprintf(`{%s,"metricName":"queue","timestamp":"2026-01-01T00:00:00Z","value":"2500m"}`, described)
		}
		return fmt.Sprintf(`{%s,"metric":{"name":"queue"},"timestamp":"2026-01-01T00:00:00Z","value":"2500m"}`, described)
	}
	list := func(items ...string) string {
		return fmt.Sprintf(`{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/%s","metadata":{},"items":[%s]}`, f.version, strings.Join(items, ","))
	}
	cm := "/apis/custom.metrics.k8s.io/" + f.version + "/namespaces/ns/"
	switch r.URL.Path {
	case "/api":
		fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"]}`)
	case "/apis":
		fmt.Fprintf(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"custom.metrics.k8s.io",
			"versions":[{"groupVersion":"custom.metrics.k8s.io/v1beta2","version":"v1beta2"},{"groupVersion":"custom.metrics.k8s.io/v1beta1","version":"v1beta1"}],
			"preferredVersion":{"groupVersion":"custom.metrics.k8s.io/%s","version":%q}}]}`, f.version, f.version)
	case cm + "pods/*/queue":
		fmt.Fprint(w, list(item("Pod", "p1"), item("Pod", "p2")))
	case cm + "deployments.apps/model/queue":
		fmt.Fprint(w, list(item("Deployment", "model")))
	case "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue":
		fmt.Fprint(w, `{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},
			"items":[{"metricName":"queue","metricLabels":{},"timestamp":"2026-01-01T00:00:00Z","value":"7"}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no value: not scraped","reason":"NotFound","code":404}`)
	}
}

// TestMetricsClient: the typed client asks the version discovery prefers,
// converts either version's answer, passes the selectors, and leaves a 404
// an API status error.
func TestMetricsClient(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "llm"})
	for _, version := range []string{"v1beta2", "v1beta1"} {
		t.Run(version, func(t *testing.T) {
			fake := &fakeMetricsAPI{version: version}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			c, err := NewMetricsClient(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			vals, err := c.PodValues(ctx, "ns", "queue", sel)
			if err != nil {
				t.Fatalf("PodValues: %v", err)
			}
			if len(vals) != 2 || vals["p1"] != 2.5 || vals["p2"] != 2.5 {
				t.Errorf("PodValues = %v, want p1 and p2 at 2.5", vals)
			}
			obj, err := c.Object(ctx, "ns", DeploymentKind, "model", "queue")
			if err != nil {
				t.Fatalf("Object: %v", err)
			}
			if obj.DescribedObject.Name != "model" || obj.Metric.Name != "queue" || obj.Value.AsApproximateFloat64() != 2.5 {
				t.Errorf("Object = %+v, want model's queue at 2.5", obj)
			}
			_, err = c.Object(ctx, "ns", PodKind, "gone", "queue")
			if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "not scraped") {
				t.Errorf("a 404: got %v, want a NotFound status error with the API's message", err)
			}
			ext, err := c.ExternalValues(ctx, "ns", "queue", sel)
			if err != nil {
				t.Fatalf("ExternalValues: %v", err)
			}
			if len(ext.Items) != 1 || ext.Items[0].Value.Value() != 7 {
				t.Errorf("ExternalValues = %+v, want one item at 7", ext.Items)
			}

			fake.mu.Lock()
			defer fake.mu.Unlock()
			want := []string{
				"/apis/custom.metrics.k8s.io/" + version + "/namespaces/ns/pods/*/queue?labelSelector=app=llm",
				"/apis/custom.metrics.k8s.io/" + version + "/namespaces/ns/deployments.apps/model/queue?labelSelector=",
				"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue?labelSelector=app=llm",
			}
			for _, w := range want {
				if !contains(fake.asked, w) {
					t.Errorf("never asked %s; asked %v", w, fake.asked)
				}
			}
		})
	}
}

// TestMetricsClientContext: a done context sends nothing.
func TestMetricsClientContext(t *testing.T) {
	fake := &fakeMetricsAPI{version: "v1beta2"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := NewMetricsClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.PodValues(ctx, "ns", "queue", labels.Everything()); err == nil {
		t.Error("PodValues with a cancelled context: no error")
	}
	if _, err := c.Object(ctx, "ns", PodKind, "p1", "queue"); err == nil {
		t.Error("Object with a cancelled context: no error")
	}
	if _, err := c.ExternalValues(ctx, "ns", "queue", labels.Everything()); err == nil {
		t.Error("ExternalValues with a cancelled context: no error")
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.asked) != 0 {
		t.Errorf("asked %v with a cancelled context", fake.asked)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
