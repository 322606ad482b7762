//go:build !linux

package main

import "errors"

// childProcesses needs /proc; elsewhere the check is skipped.
func childProcesses(int) ([]string, error) {
	return nil, errors.New("listing child processes needs Linux /proc")
}
