// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// hpaControllerUser is the identity kube-controller-manager's HPA controller
// uses with --use-service-account-credentials.
const hpaControllerUser = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"

var hpaControllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

// TestAuthorization: through the aggregator, a user without RBAC rights is
// refused (403) and the HPA controller's identity is served (200); talking
// to the adapter directly as the front proxy, the adapter's own delegated
// authorization gives the same answers, and a client without credentials
// is refused, even right after an authorized caller's answer to the same
// question was kept by the answer cache.
func TestAuthorization(t *testing.T) {
	e := requireEnv(t, framework.ComponentSim, framework.ComponentAdapter)
	t.Parallel()
	ns := e.Namespace(t)
	d := simDeployment("rbac", 1, "--max-num-seqs=2")
	pods := createSimDeployment(t, e, ns, d, 1)
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	path := podMetricsPath(ns, metricQueue, selector)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Wait until the admin sees the pod's value, so that a 200 below
	// carries data, not an empty list.
	var last string
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		vals, err := e.ControlPlane.Metrics.PodValues(ctx, ns, metricQueue, selector)
		if err != nil {
			noteErr(ctx, &last, err)
			return false, nil
		}
		last = formatValues(vals)
		_, ok := vals[pods[0].Name]
		return ok, nil
	}); err != nil {
		t.Fatalf("admin never saw %s for %s (last: %s): %v", metricQueue, pods[0].Name, last, err)
	}

	t.Run("aggregator", func(t *testing.T) {
		_, err := rawGet(ctx, e.ControlPlane.Impersonate("e2e-nobody", "system:authenticated"), path)
		if !apierrors.IsForbidden(err) {
			t.Errorf("user without RBAC rights: want 403 Forbidden, got %v", err)
		}
		asHPA, err := framework.NewMetricsClient(e.ControlPlane.Impersonate(hpaControllerUser, hpaControllerGroups...))
		if err != nil {
			t.Fatal(err)
		}
		vals, err := asHPA.PodValues(ctx, ns, metricQueue, selector)
		if err != nil {
			t.Fatalf("HPA controller identity: want 200, got %v", err)
		}
		if _, ok := vals[pods[0].Name]; !ok {
			t.Errorf("HPA controller identity got %s, want a value for %s", formatValues(vals), pods[0].Name)
		}
	})

	t.Run("adapter-direct", func(t *testing.T) {
		asProxy, err := e.Adapter.HTTPClient(e.ControlPlane.FrontProxyClient)
		if err != nil {
			t.Fatal(err)
		}
		anonymous, err := e.Adapter.HTTPClient(nil)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name   string
			client *http.Client
			user   string
			groups []string
			want   []int
		}{
			{"no credentials", anonymous, "", nil, []int{http.StatusUnauthorized, http.StatusForbidden}},
			{"user without rights", asProxy, "e2e-nobody", []string{"system:authenticated"}, []int{http.StatusForbidden}},
			{"HPA controller", asProxy, hpaControllerUser, hpaControllerGroups, []int{http.StatusOK}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				// An authorized caller asks the same question first, so
				// that its answer is in the answer cache (for
				// --answer-cache-ttl): the refusal must come from the
				// authorization in front of the cache.
				if code, body, err := adapterGet(ctx, asProxy, e.Adapter.URL()+path, hpaControllerUser, hpaControllerGroups); err != nil || code != http.StatusOK {
					t.Fatalf("priming as the HPA controller: %d %v %s", code, err, body)
				}
				code, body, err := adapterGet(ctx, tc.client, e.Adapter.URL()+path, tc.user, tc.groups)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tc.want {
					if code == w {
						return
					}
				}
				t.Errorf("status %d, want one of %v; body: %s", code, tc.want, body)
			})
		}
	})
}

// adapterGet sends a request to the adapter as the aggregator would, with
// the user in X-Remote-* headers (ignored unless the client presents the
// front-proxy certificate).
func adapterGet(ctx context.Context, c *http.Client, url, user string, groups []string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.Header.Set("X-Remote-User", user)
		for _, g := range groups {
			req.Header.Add("X-Remote-Group", g)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, string(body), nil
}
