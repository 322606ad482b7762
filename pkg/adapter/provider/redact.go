// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// hidePodsKey marks a context whose questions' 404s name no pod.
type hidePodsKey struct{}

// WithoutPodNames returns a context for a caller that asks about a
// workload, a Service or a label selector and may not learn the names of
// the pods behind it, nor their addresses (the KEDA scaler's port, whose
// callers are not the custom metrics API's). A question asked under it that
// finds pods without a value answers a 404 that says how many lack one and
// why (never scraped, scrape failed, stale...), without naming them or
// quoting their scrape errors, which carry their addresses.
func WithoutPodNames(ctx context.Context) context.Context {
	return context.WithValue(ctx, hidePodsKey{}, true)
}

func podNamesHidden(ctx context.Context) bool {
	hide, _ := ctx.Value(hidePodsKey{}).(bool)
	return hide
}

// text is r for a 404 message of a question asked under ctx: with the
// first pods' names and reasons, or only the counts by reason when ctx
// hides pod names (WithoutPodNames).
func (r *reasons) text(ctx context.Context) string {
	if podNamesHidden(ctx) {
		return r.countsText()
	}
	return r.String()
}

// countsText is how many pods had no value, by reason, e.g. "1 not scraped
// yet, 2 scrape failed".
func (r *reasons) countsText() string {
	var parts []string
	for st, c := range r.counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, store.Status(st)))
		}
	}
	return strings.Join(parts, ", ")
}
