// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every architecture Linux runs Kubernetes on.
const clockTicks = 100

// cpuTime is the CPU time (user + system) process pid has used so far,
// from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	}
	return parseCPUTime(string(b))
}

// parseCPUTime reads utime + stime from a /proc/PID/stat line:
// "PID (comm) STATE PPID ... utime stime ..."; comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseCPUTime(s string) (time.Duration, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("no comm in stat line %.40q", s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %.40q", s)
	}
	// Field 14 (utime) and 15 (stime) of the line; f[0] is field 3.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// memory is a process's resident set now and its peak, in bytes.
// memory is a process's resident memory in bytes: VmRSS, VmHWM (its peak),
// and VmRSS split into anonymous pages (heap, stacks: what GOMEMLIMIT
// governs) and file pages (the mapped executable).
type memory struct{ rss, hwm, anon, file int64 }

// readMemory reads the process's memory from /proc/PID/status.
func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return parseMemory(string(b))
}

// parseMemory reads VmRSS, VmHWM, RssAnon and RssFile from a
// /proc/PID/status text.
func parseMemory(status string) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	for line := range strings.SplitSeq(status, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		dst := fields[name]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("%s: %w", name, err)
		}
		*dst = kb << 10
	}
	if m.rss == 0 {
		return memory{}, fmt.Errorf("no VmRSS in %.60q", status)
	}
	return m, nil
}

// stolenTime is the CPU time the hypervisor has taken from this machine's
// cores so far (the steal column of /proc/stat's cpu line): time in which
// a runnable process here waited for a physical core that another guest
// held. On a shared virtual machine it inflates every latency measured,
// and no process here accounts for it.
func stolenTime() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read stolen CPU time: %w", err)
	}
	return parseStolen(string(b))
}

// parseStolen reads the steal field of /proc/stat's first line:
// "cpu user nice system idle iowait irq softirq steal ...", in USER_HZ.
func parseStolen(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("no steal field in /proc/stat's first line %.60q", line)
	}
	steal, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil || steal < 0 {
		return 0, fmt.Errorf("bad steal field %q", f[8])
	}
	return time.Duration(steal) * time.Second / clockTicks, nil
}
