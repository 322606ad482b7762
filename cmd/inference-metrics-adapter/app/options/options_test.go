// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package options

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr []string // substrings; empty means valid
	}{
		{name: "defaults", args: nil},
		{name: "fast e2e settings", args: []string{"--scrape-interval=1s", "--scrape-timeout=800ms", "--max-age=5s"}},
		{name: "timeout longer than interval", args: []string{"--scrape-interval=2s", "--scrape-timeout=3s"}, wantErr: []string{"--scrape-timeout (3s) must not exceed --scrape-interval (2s)"}},
		{name: "max age shorter than interval", args: []string{"--scrape-interval=10s", "--scrape-timeout=1s", "--max-age=5s"}, wantErr: []string{"--max-age (5s) must be at least --scrape-interval (10s)"}},
		{name: "zero interval", args: []string{"--scrape-interval=0"}, wantErr: []string{"--scrape-interval must be positive"}},
		{name: "tiny body limit", args: []string{"--max-body-size=10"}, wantErr: []string{"--max-body-size must be at least 1024 bytes"}},
		{name: "no concurrency", args: []string{"--scrape-concurrency=0"}, wantErr: []string{"--scrape-concurrency must be at least 1"}},
		{name: "no first-scrape concurrency", args: []string{"--first-scrape-concurrency=0"}, wantErr: []string{"--first-scrape-concurrency must be at least 1"}},
		{name: "namespace share over the pool", args: []string{"--scrape-concurrency=8", "--scrape-concurrency-per-namespace=9"}, wantErr: []string{"--scrape-concurrency-per-namespace must be between 0 and --scrape-concurrency (8), got 9"}},
		{name: "negative namespace share", args: []string{"--scrape-concurrency-per-namespace=-1"}, wantErr: []string{"--scrape-concurrency-per-namespace must be between 0"}},
		{name: "negative shutdown delay", args: []string{"--shutdown-delay=-1s"}, wantErr: []string{"--shutdown-delay must be between 0 and 5m"}},
		{name: "no shutdown delay", args: []string{"--shutdown-delay=0"}},
		{name: "LWS recheck of 2s", args: []string{"--leader-worker-sets", "--leader-worker-sets-recheck=2s"}},
		{name: "LWS recheck under 1s", args: []string{"--leader-worker-sets-recheck=500ms"}, wantErr: []string{"--leader-worker-sets-recheck must be between 1s and 1h, got 500ms"}},
		{name: "LWS recheck over 1h", args: []string{"--leader-worker-sets-recheck=2h"}, wantErr: []string{"--leader-worker-sets-recheck must be between 1s and 1h, got 2h0m0s"}},
		{name: "empty namespace entry", args: []string{"--namespaces=a,,b"}, wantErr: []string{"--namespaces has an empty entry"}},
		{name: "bad agent selector", args: []string{"--gpu-agent-selector=app in (("}, wantErr: []string{"--gpu-agent-selector"}},
		{name: "two kubeconfigs", args: []string{"--kubeconfig=/a", "--lister-kubeconfig=/b"}, wantErr: []string{"--kubeconfig and --lister-kubeconfig"}},
		{name: "several errors at once", args: []string{"--scrape-concurrency=0", "--max-body-size=1"}, wantErr: []string{"--scrape-concurrency", "--max-body-size"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	o, _ := parsed(t, []string{"--namespaces=llm", "--gpu-agent-namespace=gpu", "--scrape-interval=2s", "--scrape-timeout=1s", "--kubeconfig=/kc"})
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Namespaces, ","); got != "llm,gpu" {
		t.Errorf("namespaces %q: the agent namespace must be watched too", got)
	}
	if cfg.Scrape.Interval != 2*time.Second || cfg.Scrape.Timeout != time.Second || cfg.Scrape.Concurrency != 32 || cfg.Scrape.FirstConcurrency != 4 {
		t.Errorf("scrape config %+v", cfg.Scrape)
	}
	if cfg.ShutdownDelay != 10*time.Second {
		t.Errorf("shutdown delay %s, want the default 10s", cfg.ShutdownDelay)
	}
	if cfg.Adapter.RemoteKubeConfigFile != "/kc" {
		t.Errorf("kubeconfig not passed to the adapter base: %q", cfg.Adapter.RemoteKubeConfigFile)
	}
	if cfg.GPUAgentSelector == nil || cfg.GPUAgentSelector.String() != "app.kubernetes.io/name=inference-metrics-adapter-gpu-agent" {
		t.Errorf("agent selector %v", cfg.GPUAgentSelector)
	}
}

func TestServerConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for path, body := range map[string]string{
		good: "servers:\n  - name: my-server\n    queue: {series: my_queue}\n",
		bad:  "servers:\n  - name: my-server\n    queue: {series: my_queue}\n    kv: {series: my_kv}\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name       string
		args       []string
		wantErr    []string
		wantCustom string // a custom server the config must know
	}{
		{name: "no file", args: nil},
		{name: "good file", args: []string{"--server-config=" + good}, wantCustom: "my-server"},
		{name: "unknown key, with its line", args: []string{"--server-config=" + bad}, wantErr: []string{"--server-config: " + bad + `:4: unknown key "kv"`}},
		{name: "missing file", args: []string{"--server-config=" + filepath.Join(dir, "nope.yaml")}, wantErr: []string{"--server-config: reading server config", "nope.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			err := o.Validate()
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := o.Config()
			if err != nil {
				t.Fatal(err)
			}
			_, ok := cfg.Scrape.Servers.ByName(tc.wantCustom)
			if tc.wantCustom == "" && cfg.Scrape.Servers.Custom() != 0 || tc.wantCustom != "" && !ok {
				t.Errorf("scrape config knows %d custom servers; want %q", cfg.Scrape.Servers.Custom(), tc.wantCustom)
			}
		})
	}
}

// TestMemoryBudgetRefusesOversizedBuffers: scrape settings whose worst-case
// page buffers, (scrape-concurrency + first-scrape-concurrency) ×
// max-body-size, exceed half of the process memory limit are refused; the
// defaults fit the chart's 512Mi limit.
// Was wrong: the defaults' buffers (64 × 16 MiB) could exceed the chart's 512Mi limit.
func TestMemoryBudgetRefusesOversizedBuffers(t *testing.T) {
	const chartLimit = 512 << 20
	cases := []struct {
		name    string
		args    []string
		limit   int64
		wantErr string
	}{
		{name: "defaults under the chart's limit", limit: chartLimit},
		{name: "no limit", args: []string{"--max-body-size=1073741824"}, limit: math.MaxInt64},
		{name: "old defaults under the chart's limit", args: []string{"--scrape-concurrency=64", "--max-body-size=16777216"}, limit: chartLimit,
			wantErr: "(--scrape-concurrency 64 + --first-scrape-concurrency 4) x --max-body-size 16777216 = 1140850688 bytes"},
		// (60 + 4) x 3944304 + 10000 forecast histories x 1600 = 268435456,
		// no kept TLS connection.
		{name: "exactly half", args: []string{"--scrape-concurrency=60", "--max-body-size=3944304", "--scrape-max-kept-tls-connections=0"}, limit: chartLimit},
		{name: "one byte over half", args: []string{"--scrape-concurrency=60", "--max-body-size=3944305", "--scrape-max-kept-tls-connections=0"}, limit: chartLimit,
			wantErr: "more than half of the memory limit of 536870912 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := parsed(t, tc.args)
			err := o.validateMemoryBudget(tc.limit)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	t.Run("Validate reads the process limit", func(t *testing.T) {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(chartLimit))
		o, _ := parsed(t, []string{"--max-body-size=16777216"})
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--max-body-size 16777216") {
			t.Fatalf("Validate() = %v, want the memory budget refused", err)
		}
	})
}

// TestDependentDefaultsFollowSetFlags: a default that depends on another
// flag follows the flag the user set; only flags the user set that
// contradict each other are errors.
// Was wrong: --scrape-interval=1s alone was refused, as the default 3s timeout exceeded it.
func TestDependentDefaultsFollowSetFlags(t *testing.T) {
	cases := []struct {
		name             string
		args             []string
		wantTimeout      time.Duration
		wantMaxAge       time.Duration
		wantMaxSelectors int
		wantErr          string // substring; empty means valid
	}{
		{name: "defaults", wantTimeout: 3 * time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 2048},
		{name: "short interval alone", args: []string{"--scrape-interval=1s"}, wantTimeout: time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 2048},
		{name: "long interval alone", args: []string{"--scrape-interval=10s"}, wantTimeout: 3 * time.Second, wantMaxAge: 30 * time.Second, wantMaxSelectors: 2048},
		{name: "minute interval alone", args: []string{"--scrape-interval=1m"}, wantTimeout: 3 * time.Second, wantMaxAge: 3 * time.Minute, wantMaxSelectors: 2048},
		{name: "timeout set is kept", args: []string{"--scrape-interval=1s", "--scrape-timeout=500ms"}, wantTimeout: 500 * time.Millisecond, wantMaxAge: 15 * time.Second, wantMaxSelectors: 2048},
		{name: "max age set is kept", args: []string{"--scrape-interval=10s", "--max-age=12s"}, wantTimeout: 3 * time.Second, wantMaxAge: 12 * time.Second, wantMaxSelectors: 2048},
		{name: "per-namespace cap alone raises the total", args: []string{"--max-selectors-per-namespace=4096"}, wantTimeout: 3 * time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 4096},
		{name: "timeout set above interval", args: []string{"--scrape-interval=1s", "--scrape-timeout=2s"}, wantTimeout: 2 * time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 2048, wantErr: "--scrape-timeout (2s) must not exceed --scrape-interval (1s)"},
		{name: "timeout set above default interval", args: []string{"--scrape-timeout=6s"}, wantTimeout: 6 * time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 2048, wantErr: "--scrape-timeout (6s) must not exceed --scrape-interval (5s)"},
		{name: "max age set below interval", args: []string{"--scrape-interval=10s", "--max-age=5s"}, wantTimeout: 3 * time.Second, wantMaxAge: 5 * time.Second, wantMaxSelectors: 2048, wantErr: "--max-age (5s) must be at least --scrape-interval (10s)"},
		{name: "both selector caps set apart", args: []string{"--max-selectors-per-namespace=100", "--max-selectors=50"}, wantTimeout: 3 * time.Second, wantMaxAge: 15 * time.Second, wantMaxSelectors: 50, wantErr: "--max-selectors (50) must be at least --max-selectors-per-namespace (100)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := completed(t, tc.args)
			if o.ScrapeTimeout != tc.wantTimeout || o.MaxAge != tc.wantMaxAge || o.MaxSelectors != tc.wantMaxSelectors {
				t.Errorf("timeout %s, max age %s, max selectors %d; want %s, %s, %d",
					o.ScrapeTimeout, o.MaxAge, o.MaxSelectors, tc.wantTimeout, tc.wantMaxAge, tc.wantMaxSelectors)
			}
			checkErr(t, o.Validate(), tc.wantErr)
		})
	}
}

// parsed returns new options and their flag set after parsing args.
func parsed(t *testing.T, args []string) (*Options, *pflag.FlagSet) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, fs
}

// completed returns the options after parsing args and completing the
// defaults that follow other flags, as the command does.
func completed(t *testing.T, args []string) *Options {
	t.Helper()
	o := NewOptions()
	o.GPUAgentSelector = ""
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.Complete(fs)
	return o
}

// checkErr reports err unless it matches want: empty means no error,
// else a substring of the error.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one mentioning %q", err, want)
	}
}

// Durations whose defaults follow --scrape-interval: the answer cache's TTL
// never adds more than a quarter of an interval to a value's way to the
// HPA; the SLO window spans at least six intervals. Set explicitly, each
// must lie within its bounds.
func TestDurationsFollowInterval(t *testing.T) {
	ttl := func(o *Options) time.Duration { return o.AnswerCacheTTL }
	window := func(o *Options) time.Duration { return o.SLOWindow }
	cases := []struct {
		name    string
		args    []string
		get     func(*Options) time.Duration
		want    time.Duration
		wantErr string
	}{
		{name: "answer cache: default", get: ttl, want: time.Second},
		{name: "answer cache: short interval alone", args: []string{"--scrape-interval=1s"}, get: ttl, want: 250 * time.Millisecond},
		{name: "answer cache: long interval alone", args: []string{"--scrape-interval=30s"}, get: ttl, want: time.Second},
		{name: "answer cache: set is kept", args: []string{"--scrape-interval=1s", "--answer-cache-ttl=100ms"}, get: ttl, want: 100 * time.Millisecond},
		{name: "answer cache: zero disables", args: []string{"--answer-cache-ttl=0"}, get: ttl, want: 0},
		{name: "answer cache: negative", args: []string{"--answer-cache-ttl=-1s"}, get: ttl, want: -time.Second, wantErr: "--answer-cache-ttl must be between 0 and --scrape-interval (5s), got -1s"},
		{name: "answer cache: above the interval", args: []string{"--scrape-interval=1s", "--answer-cache-ttl=2s"}, get: ttl, want: 2 * time.Second, wantErr: "--answer-cache-ttl must be between 0 and --scrape-interval (1s), got 2s"},
		{name: "slo window: default", get: window, want: time.Minute},
		{name: "slo window: short interval alone", args: []string{"--scrape-interval=1s"}, get: window, want: time.Minute},
		{name: "slo window: long interval alone: six intervals", args: []string{"--scrape-interval=30s"}, get: window, want: 3 * time.Minute},
		{name: "slo window: set is kept", args: []string{"--slo-window=5m"}, get: window, want: 5 * time.Minute},
		{name: "slo window: under two intervals", args: []string{"--scrape-interval=10s", "--slo-window=15s"}, get: window, want: 15 * time.Second, wantErr: "--slo-window must be between 2 --scrape-interval (20s) and 1h, got 15s"},
		{name: "slo window: over an hour", args: []string{"--slo-window=2h"}, get: window, want: 2 * time.Hour, wantErr: "--slo-window must be between"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := completed(t, tc.args)
			if got := tc.get(o); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			checkErr(t, o.Validate(), tc.wantErr)
		})
	}
}
