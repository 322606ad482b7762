// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/escape"
)

// MaxNotScrapedLen bounds the reason NotScraped returns, in bytes: the
// reasons quote at most 64 bytes of an annotation's value, so this bound
// only ever cuts a reason an edit here made longer.
const MaxNotScrapedLen = 512

// NotScraped returns why the Running model-server pod is never scraped as
// it is now, or false when it may be: a bad or forbidden annotation (an
// unknown server, scheme or auth, a bad port, path or TLS server name, the
// bearer token asked for over plain http) or a --server-config setting its
// annotations contradict, naming where the setting came from. It is what
// Reconcile logs at -v=2 when it leaves the pod out; the provider puts it
// in the 404 about the pod.
//
// The reason is computed from the pod object the caller read from the
// informer, with the tracker's settings, each time it is asked: the tracker
// keeps no reason per pod, so a tenant's many bad pods cost no memory here
// beyond the informer's copy of them, and a reason goes with its pod. The
// reason quotes tenant text (annotation values): it is made printable
// (escape.Printable) and bounded (MaxNotScrapedLen).
func (t *Tracker) NotScraped(pod *corev1.Pod) (string, bool) {
	if pod == nil || !IsRunning(pod) || t.trust.Trusted(pod) {
		return "", false
	}
	if _, err := targetFor(pod, t.cfg); err != nil {
		why := err.Error()
		if len(why) > MaxNotScrapedLen {
			why = why[:MaxNotScrapedLen] + "..."
		}
		return escape.Printable(why), true
	}
	return "", false
}
