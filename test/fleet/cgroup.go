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
// root) are handled.
type memCgroup struct {
	dir string
	v2  bool
}

// cgroupStats is what the kernel accounted to the cgroup.
type cgroupStats struct {
	usage, peak int64 // bytes charged now, and the most ever
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
		c = &memCgroup{dir: filepath.Join(root, name), v2: true}
	case exists(filepath.Join(root, "memory", "memory.limit_in_bytes")):
		c = &memCgroup{dir: filepath.Join(root, "memory", name)}
	default:
		return nil, fmt.Errorf("-enforce-memory-limit needs a memory cgroup: neither %s/memory (v1) nor the v2 memory controller in %s/cgroup.subtree_control was found", root, root)
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	file := "memory.limit_in_bytes"
	if c.v2 {
		file = "memory.max"
	}
	if err := c.write(file, strconv.FormatInt(limit, 10)); err != nil {
		return nil, errors.Join(err, c.remove())
	}
	return c, nil
}

func (c *memCgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: write %s: %w", c.dir, file, err)
	}
	return nil
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
	var s cgroupStats
	read := func(file string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(c.dir, file))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	var err error
	if c.v2 {
		if s.usage, err = read("memory.current"); err != nil {
			return s, err
		}
		if s.peak, err = read("memory.peak"); err != nil {
			s.peak = -1 // kernels before 5.19 have no memory.peak
		}
		stat, err := keyed(filepath.Join(c.dir, "memory.stat"))
		if err != nil {
			return s, err
		}
		s.anon, s.file = stat["anon"], stat["file"]
		events, err := keyed(filepath.Join(c.dir, "memory.events"))
		if err != nil {
			return s, err
		}
		s.oomKills, s.limitHits = events["oom_kill"], -1
		return s, nil
	}
	if s.usage, err = read("memory.usage_in_bytes"); err != nil {
		return s, err
	}
	if s.peak, err = read("memory.max_usage_in_bytes"); err != nil {
		return s, err
	}
	if s.limitHits, err = read("memory.failcnt"); err != nil {
		return s, err
	}
	stat, err := keyed(filepath.Join(c.dir, "memory.stat"))
	if err != nil {
		return s, err
	}
	s.anon, s.file = stat["rss"], stat["cache"]
	oom, err := keyed(filepath.Join(c.dir, "memory.oom_control"))
	if err != nil {
		return s, err
	}
	s.oomKills = oom["oom_kill"]
	return s, nil
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
