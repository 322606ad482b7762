// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// memCgroup is a memory cgroup holding the adapter, limited as the kubelet
// limits a container: the kernel then charges the adapter's anonymous
// memory and the page cache it reads (its own executable included) to the
// cgroup, reclaims file pages at the limit, and OOM-kills the adapter if
// what cannot be reclaimed exceeds it. Both cgroup v1 (a memory hierarchy
// at /sys/fs/cgroup/memory) and v2 (the memory controller enabled at the
// root) are handled; they differ only in their files' names (cgroupFiles).
type memCgroup struct {
	dir   string
	files cgroupFiles
}

// cgroupFiles names a cgroup version's memory files and memory.stat keys.
type cgroupFiles struct {
	limit, usage, peak string
	failcnt            string // "" where the version has none
	anon, file         string // keys of memory.stat
	oom                string // the file with the oom_kill count
}

var (
	cgroupV1 = cgroupFiles{limit: "memory.limit_in_bytes", usage: "memory.usage_in_bytes", peak: "memory.max_usage_in_bytes",
		failcnt: "memory.failcnt", anon: "rss", file: "cache", oom: "memory.oom_control"}
	cgroupV2 = cgroupFiles{limit: "memory.max", usage: "memory.current", peak: "memory.peak",
		anon: "anon", file: "file", oom: "memory.events"}
)

// cgroupStats is what the kernel accounted to the cgroup.
type cgroupStats struct {
	usage, peak int64 // bytes charged now, and the most ever (-1: not reported)
	anon, file  int64 // of usage: anonymous pages, page cache
	oomKills    int64
	limitHits   int64 // v1 failcnt: charges that hit the limit (reclaim); -1 on v2
}

// newMemCgroup creates a cgroup named after this process, limited to limit
// bytes, under the first writable memory hierarchy found.
func newMemCgroup(root string, limit int64) (*memCgroup, error) {
	name := fmt.Sprintf("ima-fleet-%d", os.Getpid())
	var c *memCgroup
	switch {
	case hasWord(filepath.Join(root, "cgroup.subtree_control"), "memory"):
		c = &memCgroup{dir: filepath.Join(root, name), files: cgroupV2}
	case exists(filepath.Join(root, "memory", cgroupV1.limit)):
		c = &memCgroup{dir: filepath.Join(root, "memory", name), files: cgroupV1}
	default:
		return nil, fmt.Errorf("--enforce-memory-limit needs a memory cgroup: neither %s/memory (v1) nor the v2 memory controller in %s/cgroup.subtree_control was found", root, root)
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, c.files.limit), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("cgroup %s: write %s: %w", c.dir, c.files.limit, err), c.remove())
	}
	return c, nil
}

// wrap writes, next to bin, a script that moves itself into the cgroup and
// then executes bin with its arguments: the adapter starts inside the
// cgroup, with the script's PID.
func (c *memCgroup) wrap(bin string) (string, error) {
	script := bin + "-in-cgroup"
	body := fmt.Sprintf("#!/bin/sh\necho $$ > %q || exit 1\nexec %q \"$@\"\n", filepath.Join(c.dir, "cgroup.procs"), bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return "", fmt.Errorf("write %s: %w", script, err)
	}
	return script, nil
}

// stats reads the cgroup's memory accounting.
func (c *memCgroup) stats() (cgroupStats, error) {
	f := c.files
	s := cgroupStats{peak: -1, limitHits: -1}
	var err error
	if s.usage, err = c.number(f.usage); err != nil {
		return s, err
	}
	if peak, err := c.number(f.peak); err == nil {
		s.peak = peak // v2 kernels before 5.19 have no memory.peak
	}
	if f.failcnt != "" {
		if s.limitHits, err = c.number(f.failcnt); err != nil {
			return s, err
		}
	}
	stat, err := keyed(filepath.Join(c.dir, "memory.stat"))
	if err != nil {
		return s, err
	}
	s.anon, s.file = stat[f.anon], stat[f.file]
	oom, err := keyed(filepath.Join(c.dir, f.oom))
	if err != nil {
		return s, err
	}
	s.oomKills = oom["oom_kill"]
	return s, nil
}

// number reads a cgroup file that holds one number.
func (c *memCgroup) number(file string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// remove deletes the cgroup once the processes in it have exited.
func (c *memCgroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(c.dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup: %w", err)
}

// keyed reads a cgroup file of "key value" lines.
func keyed(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyed(string(b)), nil
}

func parseKeyed(s string) map[string]int64 {
	out := map[string]int64{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

func hasWord(path, word string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(" "+strings.Join(strings.Fields(string(b)), " ")+" ", " "+word+" ")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// dropPageCache writes bin's pages out and drops them from the page cache,
// so that the adapter's own reads of its executable are charged to its
// cgroup, as a container's first reads of its image are.
func dropPageCache(bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", bin, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop %s from the page cache: %w", bin, err)
	}
	return nil
}
