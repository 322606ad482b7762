// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestValidateEnforceMemoryLimit(t *testing.T) {
	o := validOptions()
	o.enforceMemoryLimit = true
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--enforce-memory-limit needs --memory-limit") {
		t.Fatalf("validate = %v, want the missing --memory-limit named", err)
	}
	o.memoryLimit = "200Mi"
	if err := o.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
}

// TestMemCgroup lays out a v1 and a v2 cgroup file system in a temporary
// directory, as the kernel presents them, and checks which one is chosen,
// the limit written, and the accounting read back.
func TestMemCgroup(t *testing.T) {
	tests := []struct {
		name      string
		layout    map[string]string // files under the root
		stats     map[string]string // files in the new cgroup
		limitFile string
		want      cgroupStats
	}{
		{
			name:      "v1",
			layout:    map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"},
			limitFile: "memory.limit_in_bytes",
			stats: map[string]string{
				"memory.usage_in_bytes":     "209715200\n",
				"memory.max_usage_in_bytes": "210763776\n",
				"memory.failcnt":            "1234\n",
				"memory.stat":               "cache 62914560\nrss 146800640\nmapped_file 60817408\ntotal_rss 146800640\n",
				"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
			},
			want: cgroupStats{usage: 200 << 20, peak: 201 << 20, anon: 140 << 20, file: 60 << 20, limitHits: 1234},
		},
		{
			name:      "v2",
			layout:    map[string]string{"cgroup.subtree_control": "cpu io memory pids\n"},
			limitFile: "memory.max",
			stats: map[string]string{
				"memory.current": "104857600\n",
				"memory.stat":    "anon 73400320\nfile 31457280\nfile_mapped 30408704\n",
				"memory.events":  "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n",
			},
			// No memory.peak (kernels before 5.19): reported as unknown.
			want: cgroupStats{usage: 100 << 20, peak: -1, anon: 70 << 20, file: 30 << 20, oomKills: 1, limitHits: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tt.layout {
				writeFile(t, filepath.Join(root, name), body)
			}
			c, err := newMemCgroup(root, 200<<20)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(c.dir, tt.limitFile)); err != nil || string(b) != strconv.Itoa(200<<20) {
				t.Fatalf("%s = %q, %v; want the limit", tt.limitFile, b, err)
			}
			for name, body := range tt.stats {
				writeFile(t, filepath.Join(c.dir, name), body)
			}
			got, err := c.stats()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("stats = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, filepath.Join(root, "cgroup.subtree_control"), "cpu pids\n") // v2 without the memory controller
		if _, err := newMemCgroup(root, 200<<20); err == nil || !strings.Contains(err.Error(), "needs a memory cgroup") {
			t.Fatalf("newMemCgroup = %v, want an error naming what is missing", err)
		}
	})
}

// TestWrapJoinsTheCgroup runs the wrapper script: it writes its PID to
// cgroup.procs, then runs the binary with the arguments given, as that PID.
func TestWrapJoinsTheCgroup(t *testing.T) {
	dir := t.TempDir()
	c := &memCgroup{dir: dir}
	writeFile(t, filepath.Join(dir, "cgroup.procs"), "")
	bin := filepath.Join(dir, "show")
	writeFile(t, bin, "#!/bin/sh\necho \"$$ $*\"\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := c.wrap(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "a b", "c").Output()
	if err != nil {
		t.Fatalf("run %s: %v", script, err)
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(procs))
	if want := pid + " a b c\n"; string(out) != want || pid == "" {
		t.Errorf("output %q with cgroup.procs %q; want %q", out, procs, want)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
