// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import corev1 "k8s.io/api/core/v1"

// IsRunning reports whether pod is a candidate target: phase Running with an IP.
func IsRunning(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp == nil
}

// IsReady reports whether pod's Ready condition is true.
func IsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
