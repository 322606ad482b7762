// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package framework

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
