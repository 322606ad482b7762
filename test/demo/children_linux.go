// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// childProcesses lists the running children of pid ("PID name"), read
// from /proc. Zombies count as gone.
func childProcesses(pid int) ([]string, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		child, name, state, ppid, ok := parseStat(string(b))
		if ok && ppid == pid && state != "Z" {
			out = append(out, fmt.Sprintf("%d %s", child, name))
		}
	}
	return out, nil
}

// parseStat reads pid, comm, state and ppid from a /proc/PID/stat line:
// "PID (comm) STATE PPID ..."; comm may hold spaces and parentheses.
func parseStat(s string) (pid int, comm, state string, ppid int, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return 0, "", "", 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return 0, "", "", 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, "", "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return 0, "", "", 0, false
	}
	return pid, s[open+1 : end], fields[0], ppid, true
}
