// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SimDeployment is a Deployment of pods labelled app=name whose one container
// the kubelet stand-in runs as inference-sim with args, serving its API and
// /metrics on the container port named http (8000).
func SimDeployment(name string, replicas int32, args []string) *appsv1.Deployment {
	lbls := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: new(false),
					Containers: []corev1.Container{{
						Name:  "server",
						Image: SimImage,
						Args:  args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
					}},
				},
			},
		},
	}
}
