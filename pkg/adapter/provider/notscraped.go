// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/store"
)

// NotScrapedReasoner is the optional part of Demand that says why a
// Running pod is never scraped as it is now (a bad or forbidden annotation;
// targets.Tracker implements it). Without it a never-scraped pod's 404
// says "not scraped yet".
type NotScrapedReasoner interface {
	NotScraped(pod *corev1.Pod) (string, bool)
}

// notScrapedPrefix begins the detail explainNotScraped gives a sample:
// describe writes such a detail alone, not after "not scraped yet", as the
// pod will not be scraped until it changes.
const notScrapedPrefix = "not scraped: "

// explainNotScraped gives s, pod's sample, the reason the pod is left out
// of the targets when s says it was never scraped and the demand knows
// why. The status stays NotScraped: counts of reasons are unchanged.
func (p *Provider) explainNotScraped(pod *corev1.Pod, s store.Sample) store.Sample {
	if s.Status != store.NotScraped || s.Detail != "" {
		return s // a GPU signal's "no gpu-agent reported this pod" stays
	}
	r, ok := p.demand.(NotScrapedReasoner)
	if !ok {
		return s
	}
	if why, ok := r.NotScraped(pod); ok {
		s.Detail = notScrapedPrefix + why
	}
	return s
}

// isNotScrapedDetail reports whether s carries explainNotScraped's reason.
func isNotScrapedDetail(s store.Sample) bool {
	return s.Status == store.NotScraped && strings.HasPrefix(s.Detail, notScrapedPrefix)
}
