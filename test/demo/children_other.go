// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "errors"

// childProcesses needs /proc; elsewhere the check is skipped.
func childProcesses(int) ([]string, error) {
	return nil, errors.New("listing child processes needs Linux /proc")
}
