// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the real Kubernetes control-plane binaries (kube-apiserver,
// kube-controller-manager, etcd) and helm that the end-to-end tests build and run.
// It is its own module so that the project's go.mod stays small.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
